package strict

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzUnmarshal checks two properties on arbitrary input:
//   - strict is never looser than encoding/json: whatever it accepts,
//     encoding/json accepts too, with the same result;
//   - an accepted value re-encodes to bytes that strict accepts again and
//     that decode to the same value (the golden-file round trip).
//
// The seed corpus in testdata/fuzz/FuzzUnmarshal holds one input per
// refusal the package documents.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{"outcome":"a","count":1}`,
		`{"outcome":"a","count":1,"items":[{"id":1}],"labels":{"a":"b"},"raw":[{"k":1}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got sample
		if err := Unmarshal(data, &got); err != nil {
			if !reflect.DeepEqual(got, sample{}) {
				t.Fatalf("refused input %q but wrote %+v", data, got)
			}
			return
		}
		var loose sample
		if err := json.Unmarshal(data, &loose); err != nil {
			t.Fatalf("strict accepted %q, encoding/json refused it: %v", data, err)
		}
		if !reflect.DeepEqual(got, loose) {
			t.Fatalf("strict and encoding/json disagree on %q: %+v vs %+v", data, got, loose)
		}
		out, err := Marshal(got)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		var again sample
		if err := Unmarshal(out, &again); err != nil {
			t.Fatalf("re-encoded %q is refused: %v", out, err)
		}
		if !reflect.DeepEqual(normalise(got), normalise(again)) {
			t.Fatalf("round trip changed the value: %+v vs %+v", got, again)
		}
	})
}

// normalise compacts raw values, the one part Marshal may re-space.
func normalise(s sample) sample {
	if s.Raw != nil {
		var v any
		_ = json.Unmarshal(s.Raw, &v)
		s.Raw, _ = json.Marshal(v)
	}
	return s
}
