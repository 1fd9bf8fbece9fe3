package arch

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// ReadmeMaxLines is the longest the README may be: it is a front door,
// and the reference lives in docs/.
const ReadmeMaxLines = 110

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile(`(?m)^#{1,6} +(.+?)\s*$`)
	slugDrop  = regexp.MustCompile(`[^a-z0-9 _-]`)
)

// slug is the anchor GitHub gives a heading: lower case, punctuation
// dropped, spaces as hyphens.
func slug(heading string) string {
	s := slugDrop.ReplaceAllString(strings.ToLower(heading), "")
	return strings.ReplaceAll(s, " ", "-")
}

// Links checks the README's length and that every relative link in
// README.md and docs/*.md names a file that exists and, for a Markdown
// file, a heading with that anchor.
func Links(root string) []string {
	var out []string
	readme := filepath.Join(root, "README.md")
	if n, err := countLines(readme); err != nil {
		return []string{err.Error()}
	} else if n > ReadmeMaxLines {
		out = append(out, fmt.Sprintf("README.md: %d lines, more than %d: move reference material to docs/", n, ReadmeMaxLines))
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return []string{err.Error()}
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := map[string]bool{}
		for _, m := range headingRE.FindAllStringSubmatch(stripFences(string(b)), -1) {
			a[slug(m[1])] = true
		}
		anchors[path] = a
		return a, nil
	}
	for _, f := range append([]string{readme}, docs...) {
		b, err := os.ReadFile(f)
		if err != nil {
			return []string{err.Error()}
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				if p := checkLink(f, m[1], anchorsOf); p != "" {
					out = append(out, fmt.Sprintf("%s:%d: link %s: %s", rel(root, f), i+1, m[1], p))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// checkLink says what is wrong with one link from file, or "".
func checkLink(file, target string, anchorsOf func(string) (map[string]bool, error)) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	path, anchor, _ := strings.Cut(target, "#")
	full := file
	if path != "" {
		full = filepath.Join(filepath.Dir(file), path)
		if _, err := os.Stat(full); err != nil {
			return "no such file"
		}
	}
	if anchor == "" || !strings.HasSuffix(full, ".md") {
		return ""
	}
	a, err := anchorsOf(full)
	if err != nil {
		return err.Error()
	}
	if !a[anchor] {
		return "no heading with that anchor"
	}
	return ""
}

// stripFences drops fenced code blocks, whose # lines are not headings.
func stripFences(doc string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
