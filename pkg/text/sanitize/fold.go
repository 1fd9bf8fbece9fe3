package sanitize

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// unit is one rune of a matching form and the byte offset in the checked
// text of the rune it came from.
type unit struct {
	r   rune
	off int
}

// latin is [lookalikes] as a map, built once.
var latin = func() map[rune]rune {
	m := make(map[rune]rune, 600)
	for _, l := range lookalikes {
		for _, r := range l.from {
			m[r] = rune(l.to)
		}
	}
	return m
}()

// normalise appends text's runes in their matching form to dst: Unicode
// compatibility decomposition (NFKD, the K of NFKC: full-width,
// mathematical, circled, ligature and other compatibility forms become
// their plain letters), combining marks dropped (so accents and overlays
// hide nothing), letters of other scripts that look like Latin ones
// mapped to those (Unicode TR39's confusables, [lookalikes]), and case
// folded. It is the skeleton of UTS #39 narrowed to what the check needs,
// and idempotent.
func normalise(dst []unit, text string) []unit {
	var it norm.Iter
	it.InitString(norm.NFKD, text)
	for !it.Done() {
		pos := it.Pos()
		for _, r := range string(it.Next()) {
			dst = append(dst, unit{r, pos})
			if r < 0x80 {
				if 'A' <= r && r <= 'Z' {
					dst[len(dst)-1].r = r + 'a' - 'A'
				}
				continue
			}
			if unicode.In(r, unicode.Mn, unicode.Me) {
				dst = dst[:len(dst)-1]
				continue
			}
			dst[len(dst)-1].r = fold1(r)
		}
	}
	return dst
}

// fold1 maps a non-ASCII rune without a compatibility decomposition: to
// the Latin letter it looks like, or else to lower case (and to that
// lower case's Latin look-alike, so the fold is idempotent).
func fold1(r rune) rune {
	if l, ok := latin[r]; ok {
		return l
	}
	r = unicode.ToLower(r)
	if l, ok := latin[r]; ok {
		return l
	}
	return r
}

// form is a matching form of a text: the folded string and, for each of
// its bytes and one past the end, the offset in the text it came from.
type form struct {
	s   string
	off []int
}

// formBuilder builds a form.
type formBuilder struct {
	b   strings.Builder
	off []int
}

func (f *formBuilder) add(r rune, off int) {
	if r < 0x80 {
		f.b.WriteByte(byte(r))
		f.off = append(f.off, off)
		return
	}
	n := f.b.Len()
	f.b.WriteRune(r)
	for range f.b.Len() - n {
		f.off = append(f.off, off)
	}
}

func (f *formBuilder) done(end int) form {
	return form{s: f.b.String(), off: append(f.off, end)}
}

func alnum(r rune) bool {
	if r < 0x80 {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

func space(r rune) bool {
	if r < 0x80 {
		return r == ' ' || '\t' <= r && r <= '\r'
	}
	return unicode.IsSpace(r)
}

// markupForm is the form markup is found in: every white space rune
// removed, so "<tool_\ncall>" and "< |im_start| >" read as the markup they
// are.
func markupForm(us []unit, end int) form {
	var f formBuilder
	f.b.Grow(len(us))
	f.off = make([]int, 0, len(us)+1)
	for _, u := range us {
		if !space(u.r) {
			f.add(u.r, u.off)
		}
	}
	return f.done(end)
}

// span is a byte range of a form.
type span struct{ start, end int }

// phraseForm is the form phrases are found in: runs of white space folded
// to one space, and letters spaced out by a separator ("s p a c e d",
// "s.p.a.c.e.d", "s-p-a-c-e-d", three letters or more) joined into words.
// Within such a run a gap unlike the run's first one ("i g n o r e   a l
// l") is a word break and becomes a space. It also returns where the
// joined runs are in the form, for phrases looked for with the word
// breaks ignored too.
func phraseForm(us []unit, end int) (form, []span) {
	join, brk, letters := spaced(us)
	var f formBuilder
	f.b.Grow(len(us))
	f.off = make([]int, 0, len(us)+1)
	var runs []span
	inSpace := false
	for i, u := range us {
		if join[i] {
			continue
		}
		if len(letters) > 0 && i == letters[0].start {
			runs = append(runs, span{f.b.Len(), -1})
		}
		r := u.r
		if brk[i] || space(r) {
			if inSpace {
				continue
			}
			r = ' '
		}
		inSpace = r == ' '
		f.add(r, u.off)
		if len(letters) > 0 && i == letters[0].end {
			runs[len(runs)-1].end = f.b.Len()
			letters = letters[1:]
		}
	}
	return f.done(end), runs
}

// spaced finds letters spaced out: join[i] is true for a separator rune to
// drop (it joins two letters of a word), brk[i] for one of a gap that
// breaks words inside such a run, and runs holds the index of each run's
// first and last letter.
func spaced(us []unit) (join, brk []bool, runs []span) {
	join = make([]bool, len(us))
	brk = make([]bool, len(us))
	single := func(i int) bool { // us[i] is a letter standing alone
		return alnum(us[i].r) && (i == 0 || !alnum(us[i-1].r)) && (i+1 == len(us) || !alnum(us[i+1].r))
	}
	var letters []int
	for i := 0; i < len(us); i++ {
		if !single(i) {
			continue
		}
		// The run of single letters from i: each gap one to three
		// runes, none a line break.
		letters = append(letters[:0], i)
		for j := i; ; {
			k := j + 1
			for k < len(us) && k-j <= 4 && !alnum(us[k].r) && us[k].r != '\n' {
				k++
			}
			if k == j+1 || k-j > 4 || k >= len(us) || !single(k) {
				break
			}
			letters = append(letters, k)
			j = k
		}
		last := letters[len(letters)-1]
		if len(letters) >= 3 {
			first := gap(us, letters[0], letters[1])
			for n := 1; n < len(letters); n++ {
				a, b := letters[n-1], letters[n]
				mark := join
				if gap(us, a, b) != first {
					mark = brk
				}
				for k := a + 1; k < b; k++ {
					mark[k] = true
				}
			}
			runs = append(runs, span{i, last})
		}
		i = last
	}
	return join, brk, runs
}

func gap(us []unit, a, b int) string {
	var s strings.Builder
	for k := a + 1; k < b; k++ {
		s.WriteRune(us[k].r)
	}
	return s.String()
}

// squash is the form's letters and digits alone, with for each byte the
// offset in the form it came from.
func squash(f form) (string, []int) {
	var b strings.Builder
	at := make([]int, 0, len(f.s)+1)
	for i, r := range f.s {
		if alnum(r) {
			n := b.Len()
			b.WriteRune(r)
			for range b.Len() - n {
				at = append(at, i)
			}
		}
	}
	return b.String(), append(at, len(f.s))
}

// fold is the phrase form of text as a string: what the check matches
// phrases against (tests use it to check the fold is idempotent).
func fold(text string) string {
	us := normalise(nil, text)
	f, _ := phraseForm(us, len(text))
	return f.s
}
