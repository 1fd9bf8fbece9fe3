package strict

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

type inner struct {
	ID   int64  `json:"id"`
	Note string `json:"note,omitempty"`
}

type sample struct {
	Outcome string            `json:"outcome"`
	Count   int               `json:"count"`
	Small   uint8             `json:"small,omitempty"`
	Items   []inner           `json:"items,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	Ptr     *inner            `json:"ptr,omitempty"`
	Raw     json.RawMessage   `json:"raw,omitempty"`
	Flag    bool              `json:"flag,omitempty"`
}

func TestUnmarshalRefuses(t *testing.T) {
	tests := []struct {
		name, in, path, reason string
	}{
		{"unknown field", `{"outcome":"a","count":1,"extra":1}`, "extra", "unknown field"},
		{"case differs", `{"Outcome":"a","count":1}`, "Outcome", "key case differs"},
		{"case differs nested", `{"outcome":"a","count":1,"items":[{"ID":1}]}`, "items[0].ID", "key case differs"},
		{"duplicate key", `{"outcome":"a","outcome":"b","count":1}`, "outcome", "duplicate key"},
		{"duplicate key in map", `{"outcome":"a","count":1,"labels":{"k":"1","k":"2"}}`, "labels.k", "duplicate key"},
		{"duplicate key in raw", `{"outcome":"a","count":1,"raw":{"x":{"y":1,"y":2}}}`, "raw.x.y", "duplicate key"},
		{"trailing data", `{"outcome":"a","count":1} {}`, "", "trailing data"},
		{"trailing garbage", `{"outcome":"a","count":1}x`, "", "trailing data"},
		{"fraction", `{"outcome":"a","count":1.5}`, "count", "fraction or exponent"},
		{"fraction zero", `{"outcome":"a","count":1.0}`, "count", "fraction or exponent"},
		{"exponent", `{"outcome":"a","count":1e3}`, "count", "fraction or exponent"},
		{"exponent upper", `{"outcome":"a","count":1E3}`, "count", "fraction or exponent"},
		{"out of range", `{"outcome":"a","count":1,"small":256}`, "small", "out of range"},
		{"negative unsigned", `{"outcome":"a","count":1,"small":-1}`, "small", "out of range"},
		{"missing required", `{"outcome":"a"}`, "count", "missing field"},
		{"null for string", `{"outcome":null,"count":1}`, "outcome", "null is not allowed"},
		{"null for slice", `{"outcome":"a","count":1,"items":null}`, "items", "null is not allowed"},
		{"wrong type", `{"outcome":1,"count":1}`, "outcome", "want a string"},
		{"array for struct", `["a",1]`, "", "want an object"},
		{"not utf8", "{\"outcome\":\"\xff\",\"count\":1}", "", "not valid UTF-8"},
		{"truncated", `{"outcome":"a","count":`, "count", "unexpected end"},
		{"empty", ``, "", "unexpected end"},
		{"syntax", `{"outcome" "a"}`, "outcome", "syntax error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got sample
			err := Unmarshal([]byte(tt.in), &got)
			if err == nil {
				t.Fatalf("Unmarshal(%q) = nil, want error", tt.in)
			}
			se, ok := err.(*Error)
			if !ok {
				t.Fatalf("Unmarshal(%q) error %T, want *Error", tt.in, err)
			}
			if se.Path != tt.path || !strings.Contains(se.Reason, tt.reason) {
				t.Errorf("Unmarshal(%q) = %v, want path %q reason containing %q", tt.in, err, tt.path, tt.reason)
			}
			if !reflect.DeepEqual(got, sample{}) {
				t.Errorf("Unmarshal(%q) wrote %+v into v on error", tt.in, got)
			}
		})
	}
}

func TestUnmarshalAccepts(t *testing.T) {
	in := `{"outcome":"a<&>","count":-3,"small":255,"items":[{"id":9007199254740993,"note":"n"}],"labels":{"k":"v"},"ptr":null,"raw":{"x":[1,2.5,"s"]},"flag":true}`
	var got sample
	if err := Unmarshal([]byte(in), &got); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if got.Items[0].ID != 9007199254740993 {
		t.Errorf("ID = %d, want exact 64-bit integer", got.Items[0].ID)
	}
	out, err := Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != strings.Replace(in, `"ptr":null,`, "", 1) {
		t.Errorf("Marshal round trip:\n got %s\nwant %s", out, in)
	}
}

func TestFloatFieldRefused(t *testing.T) {
	var v struct {
		F float64 `json:"f"`
	}
	if err := Unmarshal([]byte(`{"f":1}`), &v); err == nil || !strings.Contains(err.Error(), "float") {
		t.Errorf("Unmarshal into float field = %v, want a float refusal", err)
	}
}

func TestNeedsPointer(t *testing.T) {
	var s sample
	if err := Unmarshal([]byte(`{}`), s); err == nil {
		t.Error("Unmarshal into a non-pointer succeeded")
	}
}

type ping struct {
	Seq int64 `json:"seq"`
}

func (*ping) Tag() string { return "ping" }

type stop struct{}

func (*stop) Tag() string { return "stop" }

type event interface{ Tag() string }

var events = NewUnion[event]("type",
	func() event { return new(ping) },
	func() event { return new(stop) },
)

func TestUnion(t *testing.T) {
	for _, tt := range []struct{ in, err string }{
		{`{"type":"ping","seq":3}`, ""},
		{`{"seq":3,"type":"ping"}`, ""},
		{`{"type":"stop"}`, ""},
		{`{"type":"stop","seq":1}`, "unknown field"},
		{`{"type":"ping"}`, "missing field"},
		{`{"type":"pong","seq":3}`, "unknown type"},
		{`{"seq":3}`, "missing type tag"},
		{`{"type":1}`, "not a string"},
		{`{"type":"ping","type":"stop","seq":1}`, "duplicate key"},
		{`{"Type":"ping","seq":1}`, "missing type tag"},
		{`[]`, "want an object"},
	} {
		v, err := events.Decode([]byte(tt.in))
		if tt.err == "" {
			if err != nil {
				t.Errorf("Decode(%s) = %v", tt.in, err)
				continue
			}
			out, err := events.Encode(v)
			if err != nil {
				t.Fatal(err)
			}
			again, err := events.Decode(out)
			if err != nil || !reflect.DeepEqual(again, v) {
				t.Errorf("Encode(Decode(%s)) = %s, does not decode back (%v)", tt.in, out, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("Decode(%s) = %v, want error containing %q", tt.in, err, tt.err)
		}
		// Only a tag outside the union is "another protocol's message".
		if unknown := tt.err == "unknown type"; errors.Is(err, ErrUnknownType) != unknown {
			t.Errorf("Decode(%s): errors.Is(%v, ErrUnknownType) = %v, want %v", tt.in, err, !unknown, unknown)
		}
	}
	if out, _ := events.Encode(&ping{Seq: 1}); string(out) != `{"type":"ping","seq":1}` {
		t.Errorf("Encode(ping) = %s", out)
	}
	if out, _ := events.Encode(&stop{}); string(out) != `{"type":"stop"}` {
		t.Errorf("Encode(stop) = %s", out)
	}
}

type bad struct {
	Type string `json:"TYPE"`
}

func (*bad) Tag() string { return "bad" }

func TestUnionRefusesConfusableField(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewUnion with a field that folds to the key did not panic")
		}
	}()
	NewUnion[event]("type", func() event { return new(bad) })
}
