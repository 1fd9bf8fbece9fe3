package pdftext

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// Make builds a one-page PDF whose content stream shows lines, each with
// Tj, compressed with FlateDecode if flate: the shape simple writers
// produce. Tests of other packages build their PDFs the same way.
func Make(flate bool, lines ...string) []byte {
	var content bytes.Buffer
	content.WriteString("BT /F1 12 Tf 72 720 Td\n")
	for i, l := range lines {
		if i > 0 {
			content.WriteString("0 -14 Td\n")
		}
		l = strings.NewReplacer(`\`, `\\`, "(", `\(`, ")", `\)`).Replace(l)
		fmt.Fprintf(&content, "(%s) Tj\n", l)
	}
	content.WriteString("ET\n")
	body, filter := content.Bytes(), ""
	if flate {
		var z bytes.Buffer
		w := zlib.NewWriter(&z)
		w.Write(body)
		w.Close()
		body, filter = z.Bytes(), " /Filter /FlateDecode"
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n")
	b.WriteString("2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n")
	b.WriteString("3 0 obj << /Type /Page /Parent 2 0 R /Contents 4 0 R >> endobj\n")
	fmt.Fprintf(&b, "4 0 obj << /Length %d%s >>\nstream\n", len(body), filter)
	b.Write(body)
	b.WriteString("\nendstream\nendobj\ntrailer << /Root 1 0 R >>\n%%EOF\n")
	return b.Bytes()
}

func TestText(t *testing.T) {
	for _, tt := range []struct {
		name string
		pdf  []byte
		want string
	}{
		{"plain", Make(false, "Quarterly report", "Revenue: 42"), "Quarterly report\nRevenue: 42"},
		{"flate", Make(true, "Hello (world)", `back\slash`), "Hello (world)\nback\\slash"},
		{"tj array", []byte("%PDF-1.4\n1 0 obj << /Length 40 >>\nstream\nBT [(Hel) 20 (lo) -300 (there)] TJ ET\nendstream\nendobj\n"), "Hello there"},
		{"hex and octal", []byte("%PDF-1.4\n1 0 obj << >>\nstream\nBT <48692c> Tj (\\101\\102) Tj ET\nendstream\n"), "Hi,AB"},
		{"utf16", []byte("%PDF-1.4\n1 0 obj << >>\nstream\nBT <FEFF00DC0062> Tj ET\nendstream\n"), "Üb"},
		{"image skipped", []byte("%PDF-1.4\n1 0 obj << /Subtype /Image >>\nstream\n(secret) Tj\nendstream\n"), ""},
		{"controls dropped", []byte("%PDF-1.4\n1 0 obj << >>\nstream\nBT (a\\033b\\000c) Tj ET\nendstream\n"), "abc"},
	} {
		got, cut, err := Text(tt.pdf, 1<<20)
		if err != nil || got != tt.want || cut {
			t.Errorf("%s: Text = %q, %v, %v; want %q", tt.name, got, cut, err, tt.want)
		}
	}
	if _, _, err := Text([]byte("hello"), 100); err != ErrNotPDF {
		t.Errorf("Text(not a PDF) = %v, want ErrNotPDF", err)
	}
	got, cut, _ := Text(Make(true, strings.Repeat("x", 100)), 10)
	if got != strings.Repeat("x", 10) || !cut {
		t.Errorf("capped: %q %v", got, cut)
	}
}

// FuzzText: no input panics, and the text is valid UTF-8 within the cap
// holding no control character but newline and tab.
func FuzzText(f *testing.F) {
	f.Add(Make(false, "one", "two"))
	f.Add(Make(true, "compressed (text)"))
	f.Add([]byte("%PDF-1.4\nstream\n[(a) -500 (b)] TJ (\\"))
	f.Add([]byte("%PDF-\n<< /FlateDecode >>stream\r\n\x78\x9c\x00endstream"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, _, err := Text(b, 256)
		if err != nil {
			return
		}
		if !utf8.ValidString(s) || len(s) > 256 {
			t.Fatalf("Text = %q: invalid or over the cap", s)
		}
		for _, r := range s {
			if r < 0x20 && r != '\n' && r != '\t' {
				t.Fatalf("Text = %q: control character %U", s, r)
			}
		}
	})
}
