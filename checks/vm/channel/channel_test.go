package channel

import (
	"bytes"
	"reflect"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, v := range []any{
		&Request{Op: "run", Argv: []string{"sh", "-c", "exit 3"}, Stdin: []byte{0, 1, 2}, TimeoutMS: 5000},
		&Request{Op: "put", Path: "/tmp/x", Mode: 0o755, Data: []byte("abc"), Append: true},
		&Response{Ready: true},
		&Response{Exit: 3, Stdout: []byte("out"), Stderr: []byte("err"), Truncated: true},
		&Response{Exit: -1, Error: "timeout"},
	} {
		var buf bytes.Buffer
		if err := Send(&buf, v); err != nil {
			t.Fatalf("Send(%+v): %v", v, err)
		}
		got := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		if err := Receive(&buf, got); err != nil {
			t.Fatalf("Receive of %+v: %v", v, err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("Receive = %+v, want %+v", got, v)
		}
	}
}

func TestReceiveRefuses(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"unknown field", `{"exit":0,"shell":"yes"}`},
		{"missing exit", `{"ready":true}`},
		{"float exit", `{"exit":1.5}`},
		{"trailing data", `{"exit":0}{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := bytes.NewBuffer([]byte{0, 0, 0, byte(len(tc.body))})
			buf.WriteString(tc.body)
			var r Response
			if err := Receive(buf, &r); err == nil {
				t.Errorf("Receive(%s) = %+v, want an error", tc.body, r)
			}
		})
	}
	// A header over the cap is refused before anything is allocated.
	var r Response
	if err := Receive(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff}), &r); err == nil {
		t.Error("Receive of a 4 GiB header succeeded, want an error")
	}
}

// FuzzReceive: whatever the guest sends, Receive refuses it or yields a
// Response that re-encodes and decodes to itself.
func FuzzReceive(f *testing.F) {
	for _, s := range []string{`{"exit":0}`, `{"ready":true,"exit":0}`, `{"exit":-1,"error":"x","stdout":"aGk="}`} {
		f.Add(append([]byte{0, 0, 0, byte(len(s))}, s...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Response
		if err := Receive(bytes.NewReader(data), &r); err != nil {
			return
		}
		var buf bytes.Buffer
		if err := Send(&buf, &r); err != nil {
			t.Fatalf("Send(%+v) after Receive: %v", r, err)
		}
		var again Response
		if err := Receive(&buf, &again); err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip of %+v = %+v, %v", r, again, err)
		}
	})
}
