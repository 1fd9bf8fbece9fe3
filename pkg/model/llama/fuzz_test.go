package llama

import (
	"bytes"
	"reflect"
	"testing"
	"testing/iotest"

	"wntrmute.dev/boxmaker/pkg/model/chat"
)

// collectEvents runs the SSE decoder alone and copies out every event.
func collectEvents(d *sseDecoder) ([]string, string) {
	var evs []string
	for {
		ev, err := d.next()
		if err != nil {
			return evs, err.Error()
		}
		evs = append(evs, string(ev))
	}
}

// FuzzSSE feeds arbitrary bytes to the SSE decoder and the chunk
// accumulator. Properties: no panic; no event exceeds the cap; one read and
// byte-at-a-time reads give identical events, results and errors; and a
// completion that parses replays through request marshalling unchanged.
//
// The seed corpus is testdata/fuzz/FuzzSSE, kept to small inputs: the fuzzer
// minimizes every new input it finds, and minimizing a multi-kilobyte input
// (such as the golden transcripts, which the unit tests cover) eats the whole
// fuzzing budget. The cap is small for the same reason.
func FuzzSSE(f *testing.F) {
	const max = 1024
	c, err := New(Config{BaseURL: "http://fuzz.invalid", Model: "m"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		evWhole, errWhole := collectEvents(newSSEDecoder(bytes.NewReader(data), max))
		evByte, errByte := collectEvents(newSSEDecoder(iotest.OneByteReader(bytes.NewReader(data)), max))
		if !reflect.DeepEqual(evWhole, evByte) || errWhole != errByte {
			t.Fatalf("events differ:\none read %q, %s\nbyte-wise %q, %s", evWhole, errWhole, evByte, errByte)
		}
		for _, ev := range evWhole {
			if len(ev) > max {
				t.Fatalf("event of %d bytes passed a %d-byte cap", len(ev), max)
			}
		}

		whole := parse(bytes.NewReader(data), max, 2)
		byByte := parse(iotest.OneByteReader(bytes.NewReader(data)), max, 2)
		if errString(whole.err) != errString(byByte.err) || !reflect.DeepEqual(whole.comp, byByte.comp) ||
			!reflect.DeepEqual(whole.events, byByte.events) || !reflect.DeepEqual(whole.capIDs, byByte.capIDs) {
			t.Fatalf("results differ:\none read %+v, %v\nbyte-wise %+v, %v", whole.comp, whole.err, byByte.comp, byByte.err)
		}
		if len(whole.capIDs) > 1 {
			t.Fatalf("thinking cap fired %d times", len(whole.capIDs))
		}
		if whole.err != nil {
			return
		}
		body, err := c.fullBody(Request{Messages: []chat.Message{whole.comp.Message}})
		if err != nil {
			t.Fatalf("marshal parsed message: %v", err)
		}
		var back chatRequest
		if err := jsonUnmarshalStrict(body, &back); err != nil {
			t.Fatalf("decode marshalled request: %v", err)
		}
		if !reflect.DeepEqual(back.Messages[0], whole.comp.Message) {
			t.Fatalf("replay changed the message:\n got %+v\nwant %+v", back.Messages[0], whole.comp.Message)
		}
	})
}
