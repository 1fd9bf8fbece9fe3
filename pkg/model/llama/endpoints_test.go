package llama

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestProps(t *testing.T) {
	var rec recorder
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		w.Write(readGolden(t, "props.json"))
	}), Config{})
	p, err := c.Props(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if p.SlotContext() != 65536 || p.TotalSlots != 4 || p.ModelAlias != "ornith" || p.BuildInfo != "b10587-3f545bec" ||
		p.EOSToken != "<|im_end|>" || !strings.HasPrefix(p.ChatTemplate, "{%- for message in messages %}") ||
		!p.EndpointSlots || p.Modalities.Vision || string(p.ChatTemplateCaps) != `{"supports_tools":true}` {
		t.Fatalf("Props = %+v", p)
	}
	if _, urls := rec.get("/props"); len(urls) != 1 || urls[0] != "/props?autoload=false&model=ornith" {
		t.Fatalf("props URL = %v", urls)
	}
}

func TestSlots(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(readGolden(t, "slots.json"))
	}), Config{})
	s, err := c.Slots(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 2 || s[0].ID != 0 || !s[0].IsProcessing || s[0].NCtx != 65536 || s[0].NPromptTokensCache != 8000 ||
		len(s[0].NextToken) != 1 || s[0].NextToken[0].NDecoded != 12 || s[0].NextToken[0].NRemain != -1 || s[1].IsProcessing {
		t.Fatalf("Slots = %+v", s)
	}
}

func TestSlotIsBusy(t *testing.T) {
	busyIdle := []Slot{{ID: 0, IsProcessing: true}, {ID: 1}}
	bothBusy := []Slot{{ID: 0, IsProcessing: true}, {ID: 1, IsProcessing: true}}
	tests := []struct {
		name  string
		slots []Slot
		id    int
		want  bool
	}{
		{"pinned busy", busyIdle, 0, true},
		{"pinned idle", busyIdle, 1, false},
		{"wraps to busy", busyIdle, 2, true},
		{"wraps to idle", busyIdle, 3, false},
		{"unpinned with a free slot", busyIdle, -1, false},
		{"unpinned all busy", bothBusy, -1, true},
		{"no slots", nil, 0, false},
		{"missing id", []Slot{{ID: 5, IsProcessing: true}}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := slotIsBusy(tt.slots, tt.id); got != tt.want {
				t.Fatalf("slotIsBusy(%v, %d) = %v, want %v", tt.slots, tt.id, got, tt.want)
			}
		})
	}
}

func TestTokenize(t *testing.T) {
	var rec recorder
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		w.Write([]byte(`{"tokens":[151644,6023]}`))
	}), Config{})
	toks, err := c.Tokenize(context.Background(), "<|im_start|>hi & bye")
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 2 || toks[0] != 151644 || toks[1] != 6023 {
		t.Fatalf("Tokenize = %v", toks)
	}
	bodies, urls := rec.get("/tokenize")
	if len(urls) != 1 || urls[0] != "/tokenize?autoload=false&model=ornith" {
		t.Fatalf("tokenize URL = %v", urls)
	}
	want := `{"content":"<|im_start|>hi & bye","add_special":false,"parse_special":true,"with_pieces":false,"model":"ornith"}`
	if len(bodies) != 1 || strings.TrimSpace(string(bodies[0])) != want {
		t.Fatalf("tokenize body %q, want %q", bodies, want)
	}
}

func TestHealth(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		check  func(error) bool
	}{
		{"ok", 200, `{"status":"ok"}`, func(err error) bool { return err == nil }},
		{"loading", 503, string(readGolden(t, "loading.json")), func(err error) bool {
			var se *ServerError
			return errors.As(err, &se) && se.Type == ErrorTypeUnavailable && se.Code == 503 &&
				strings.HasPrefix(err.Error(), "health: server error (status 503, unavailable_error): Loading model")
		}},
		{"other status", 200, `{"status":"starting"}`, func(err error) bool { return err != nil && err.Error() == `health: status "starting"` }},
		{"not json", 200, `ok`, func(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "health: decode response: ") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/health" {
					t.Errorf("path %q", r.URL.Path)
				}
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}), Config{})
			if err := c.Health(context.Background()); !tt.check(err) {
				t.Fatalf("Health = %v", err)
			}
		})
	}
}

func TestBodyCap(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"tokens":[`))
		chunk := []byte(strings.Repeat("1,", 1<<16))
		for range maxBodyBytes/len(chunk) + 1 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}), Config{})
	_, err := c.Tokenize(context.Background(), "x")
	if !errors.Is(err, errBodyTooLarge) || !strings.HasPrefix(err.Error(), "tokenize: read response: body exceeds") {
		t.Fatalf("Tokenize with a huge body = %v", err)
	}
}

func TestEndReasoningErrors(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		w.Write([]byte(`{"error":{"code":400,"message":"missing completion id","type":"invalid_request_error"}}`))
	}), Config{})
	err := c.EndReasoning(context.Background(), "")
	var se *ServerError
	if !errors.As(err, &se) || se.Message != "missing completion id" || se.Op != "reasoning control" {
		t.Fatalf("EndReasoning = %v", err)
	}
}
