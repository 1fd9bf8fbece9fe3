package llama

import (
	"encoding/json"
	"hash/fnv"
	"net/http"
	"strings"
	"unicode/utf8"
)

// specialTokens are the Qwen control tokens the fake's vocabulary treats as
// single tokens. The reference notes that with the deployed model's
// vocabulary <think> is one token (llama-server.md, "Observed live"), which
// is what makes reasoning control act; the ids are Qwen3's, for realism
// only: nothing in the fake depends on their values.
var specialTokens = []struct {
	text string
	id   int
}{
	{"<|endoftext|>", 151643},
	{"<|im_start|>", 151644},
	{"<|im_end|>", 151645},
	{"<tool_call>", 151657},
	{"</tool_call>", 151658},
	{"<tool_response>", 151665},
	{"</tool_response>", 151666},
	{"<think>", 151667},
	{"</think>", 151668},
}

// firstSpecialID bounds the ids of ordinary tokens, which stay below it.
const firstSpecialID = 151643

// eosPiece is the token the model samples last; it is the piece the real
// server never caches (see reuse in slots.go).
const eosPiece = "<|im_end|>"

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// tokenize splits text into token pieces. With special set, control tokens
// are recognised, as llama-server does for a rendered chat prompt and for
// /tokenize by default (parse_special true, server-context.cpp:4945-4984).
//
// Reference silent on the vocabulary, so the fake chooses a rule that is
// deterministic and splits only at byte boundaries: a control token, else a
// maximal run of ASCII letters and digits, else one byte. Pieces identify
// tokens exactly: a control token's text never comes out as one piece when
// special is false, because '<' and '>' are single-byte pieces then.
func tokenize(text string, special bool) []string {
	var out []string
	for i := 0; i < len(text); {
		if special && text[i] == '<' {
			if sp := matchSpecial(text[i:]); sp != "" {
				out = append(out, sp)
				i += len(sp)
				continue
			}
		}
		j := i + 1
		if isAlnum(text[i]) {
			for j < len(text) && isAlnum(text[j]) {
				j++
			}
		}
		out = append(out, text[i:j])
		i = j
	}
	return out
}

func matchSpecial(s string) string {
	for _, sp := range specialTokens {
		if strings.HasPrefix(s, sp.text) {
			return sp.text
		}
	}
	return ""
}

// tokenID maps a piece to its id: control tokens get their Qwen id, single
// non-alphanumeric bytes their byte value, and runs an FNV-1a hash between
// 256 and firstSpecialID. Hash collisions cannot corrupt the prompt cache,
// which compares pieces, not ids.
func tokenID(piece string) int {
	for _, sp := range specialTokens {
		if piece == sp.text {
			return sp.id
		}
	}
	if len(piece) == 1 && !isAlnum(piece[0]) {
		return int(piece[0])
	}
	h := fnv.New32a()
	h.Write([]byte(piece))
	return 256 + int(h.Sum32()%uint32(firstSpecialID-256))
}

// pieceOf inverts tokenID where it can; hashed ids have no inverse.
func pieceOf(id int) string {
	for _, sp := range specialTokens {
		if id == sp.id {
			return sp.text
		}
	}
	if id >= 0 && id < 256 {
		return string([]byte{byte(id)})
	}
	return ""
}

// Tokenize returns the token ids the fake's model sees for text, with
// control tokens parsed, as for a rendered chat prompt. len(Tokenize(p)) is
// the prompt_tokens the fake reports for a request whose prompt is p.
func Tokenize(text string) []int {
	pieces := tokenize(text, true)
	ids := make([]int, len(pieces))
	for i, p := range pieces {
		ids[i] = tokenID(p)
	}
	return ids
}

// tokenPiece is one element of a with_pieces /tokenize answer. Piece is a
// string when the piece is valid UTF-8 and an array of byte values
// otherwise (server-context.cpp:4945-4984).
type tokenPiece struct {
	ID    int `json:"id"`
	Piece any `json:"piece"`
}

// handleTokenize copies POST /tokenize (server-context.cpp:4945-4984):
// {"content": string | mixed array, "add_special": false,
// "parse_special": true, "with_pieces": false}.
func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.requestContext(r)
	defer cancel()
	_, fields, ok := s.readBody(w, r)
	if !ok {
		return
	}
	if !s.route(ctx, w, r, fields) {
		return
	}
	// add_special is accepted and ignored: Qwen vocabularies add no BOS
	// token (reference silent; the fake models a Qwen vocabulary).
	parseSpecial := jsonBool(fields, "parse_special", true)
	withPieces := jsonBool(fields, "with_pieces", false)

	var pieces []string
	var ids []int
	add := func(text string) {
		for _, p := range tokenize(text, parseSpecial) {
			pieces = append(pieces, p)
			ids = append(ids, tokenID(p))
		}
	}
	var str string
	var mixed []json.RawMessage
	switch {
	case json.Unmarshal(fields["content"], &str) == nil:
		add(str)
	case json.Unmarshal(fields["content"], &mixed) == nil:
		// A mixed array holds strings and token ids; ids pass through
		// (server-common.h tokenize_mixed). Reference silent on the piece
		// of an id: the fake inverts what it can and leaves hashed ids "".
		for _, item := range mixed {
			var id int
			if json.Unmarshal(item, &str) == nil {
				add(str)
			} else if json.Unmarshal(item, &id) == nil {
				pieces = append(pieces, pieceOf(id))
				ids = append(ids, id)
			} else {
				writeError(w, errInvalid("\"content\" must be a string or an array of strings and token ids"))
				return
			}
		}
	default:
		// Reference silent on the message; the fake answers 400.
		writeError(w, errInvalid("\"content\" must be provided"))
		return
	}

	if !withPieces {
		if ids == nil {
			ids = []int{}
		}
		writeJSON(w, http.StatusOK, struct {
			Tokens []int `json:"tokens"`
		}{ids})
		return
	}
	out := make([]tokenPiece, len(ids))
	for i, id := range ids {
		out[i] = tokenPiece{ID: id, Piece: pieceJSON(pieces[i])}
	}
	writeJSON(w, http.StatusOK, struct {
		Tokens []tokenPiece `json:"tokens"`
	}{out})
}

func pieceJSON(p string) any {
	if utf8.ValidString(p) {
		return p
	}
	b := make([]int, len(p))
	for i := range len(p) {
		b[i] = int(p[i])
	}
	return b
}
