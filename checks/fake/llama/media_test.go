package llama

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestImageParts: an image part to a model that cannot see is the
// server's 500; a malformed data URL is refused as handle_media refuses
// it; to a model that can see, the image renders as the marker and its
// digest, so the same image gives the same prompt and another does not.
func TestImageParts(t *testing.T) {
	png := "data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nfirst"))
	other := "data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nsecond"))
	withImage := func(url string) []map[string]any {
		text := "what is this?"
		return []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "text", "text": text}, {"type": "image_url", "image_url": map[string]any{"url": url}}}}}
	}
	blind := New(t, Options{})
	var e struct {
		Error apiError `json:"error"`
	}
	if code := postJSON(t, blind.URL()+"/v1/chat/completions", chatBody(withImage(png), nil), &e); code != 500 ||
		e.Error.Message != "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj" || e.Error.Type != "server_error" {
		t.Errorf("blind: %d %+v", code, e.Error)
	}
	seeing := New(t, Options{Vision: true})
	for _, tt := range []struct{ url, msg string }{
		{"data:image/png;base64", "Invalid url value"},
		{"data:text/plain;base64,aGk=", "Invalid url format: data:text/plain;base64"},
		{"data:image/png,aGk=", "url must be base64 encoded"},
	} {
		if code := postJSON(t, seeing.URL()+"/v1/chat/completions", chatBody(withImage(tt.url), nil), &e); code != 500 || e.Error.Message != tt.msg {
			t.Errorf("%s: %d %+v, want %q", tt.url, code, e.Error, tt.msg)
		}
	}
	render := func(url string) string {
		p, err := RenderPrompt(mustJSON(t, chatBody(withImage(url), nil)))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b, c := render(png), render(png), render(other)
	if a != b || a == c || !strings.Contains(a, "what is this?<__media__>[image ") {
		t.Errorf("renders: %q %q %q", a, b, c)
	}
	if got := ImageParts(mustJSON(t, chatBody(withImage(png), nil))); len(got) != 1 || got[0] != png {
		t.Errorf("ImageParts = %v", got)
	}
}
