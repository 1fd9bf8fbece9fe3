package toolinput

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// TestInputGolden decodes each golden envelope, parses its arguments and
// re-encodes it to the same bytes.
func TestInputGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/input/*.json")
	if err != nil || len(files) < 2 {
		t.Fatalf("golden envelopes: %v, %d files", err, len(files))
	}
	tools := map[string]string{"read_file.json": toolset.ReadFile, "shell_secret.json": toolset.Shell}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			golden, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			in, err := Decode(golden)
			if err != nil {
				t.Fatalf("Decode = %v", err)
			}
			args, err := toolargs.Parse(tools[filepath.Base(f)], in.Args)
			if err != nil {
				t.Fatalf("Parse = %v", err)
			}
			raw, err := args.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			out, err := json.Marshal(Input{Args: raw, Secret: in.Secret})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, golden) {
				t.Errorf("re-encoded\n%s\nwant\n%s", out, golden)
			}
		})
	}
	in, err := Decode([]byte(`{"args":{"command":"x","workdir":"/"},"secret":{"name":"API_TOKEN","value":"s3cr\u00e9t \"quoted\"\n"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := in.Secret.Value.Reveal(); got != "s3cré\x74 \"quoted\"\n" {
		t.Errorf("secret value = %q", got)
	}
	if s := fmt.Sprintf("%v %+v %#v", in, in.Secret, *in.Secret); strings.Contains(s, "s3cr") {
		t.Errorf("printing an Input shows its secret: %s", s)
	}
}

func TestDecodeInputRefusals(t *testing.T) {
	big := `{"args":{"path":"/x"},"secret":{"name":"A","value":"` + strings.Repeat("a", secret.MaxSize+1) + `"}}`
	tests := []struct{ name, in, want string }{
		{"empty", ``, "not one strict JSON object"},
		{"not an object", `[]`, "not one strict JSON object"},
		{"two objects", `{"args":{}} {"args":{}}`, "not one strict JSON object"},
		{"missing args", `{}`, "args"},
		{"null args", `{"args":null}`, "not a JSON object"},
		{"string args", `{"args":"x"}`, "not a JSON object"},
		{"unknown field", `{"args":{},"tool":"shell"}`, "refused"},
		{"case", `{"Args":{}}`, "refused"},
		{"duplicate", `{"args":{},"args":{}}`, "refused"},
		{"duplicate inside args", `{"args":{"path":"/a","path":"/b"}}`, "refused"},
		{"secret unknown field", `{"args":{},"secret":{"name":"A","value":"v","env":true}}`, "refused"},
		{"secret missing value", `{"args":{},"secret":{"name":"A"}}`, "refused"},
		{"secret lowercase", `{"args":{},"secret":{"name":"api","value":"v"}}`, "secret name"},
		{"secret path", `{"args":{},"secret":{"name":"../A","value":"v"}}`, "secret name"},
		{"secret long", `{"args":{},"secret":{"name":"A` + strings.Repeat("B", 64) + `","value":"v"}}`, "secret name"},
		{"secret empty", `{"args":{},"secret":{"name":"A","value":""}}`, "empty"},
		{"secret big", big, "over"},
		{"invalid utf8", "{\"args\":{\"path\":\"/\xff\"}}", "not one strict JSON object"},
		{"too large", `{"args":{"content":"` + strings.Repeat("a", MaxSize) + `"}}`, "over"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Decode = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	// null is how strict decoding reads an absent pointer: no secret.
	if in, err := Decode([]byte(`{"args":{},"secret":null}`)); err != nil || in.Secret != nil {
		t.Errorf("Decode(secret null) = %v, %v; want no secret", in.Secret, err)
	}
	if _, err := json.Marshal(Input{Args: json.RawMessage(`{}`), Secret: &Secret{"bad name", secret.New([]byte("v"))}}); err == nil {
		t.Error("Marshal of a bad secret name succeeded")
	}
	if _, err := json.Marshal(Input{}); err == nil {
		t.Error("Marshal of empty args succeeded")
	}
}

// FuzzDecodeInput: whatever decodes re-encodes to an envelope that decodes
// to the same thing.
func FuzzDecodeInput(f *testing.F) {
	files, _ := filepath.Glob("testdata/input/*.json")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(b)
	}
	f.Add([]byte(`{"args":{},"secret":{"name":"A","value":"\u0000"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := Decode(data)
		if err != nil {
			return
		}
		out, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("Marshal of a decoded input: %v", err)
		}
		again, err := Decode(out)
		if err != nil {
			t.Fatalf("Decode(Marshal(x)) = %v for %q", err, out)
		}
		out2, _ := json.Marshal(again)
		if !bytes.Equal(out, out2) {
			t.Fatalf("round trip changed %q to %q", out, out2)
		}
		if (in.Secret == nil) != (again.Secret == nil) || (in.Secret != nil && !in.Secret.Value.Equal(again.Secret.Value)) {
			t.Fatal("round trip changed the secret")
		}
	})
}

// TestMarshalInputRefusesInvalidUTF8: a secret that is not valid UTF-8
// would reach the tool changed (JSON replaces the bytes), so it is
// refused instead (review 15).
func TestMarshalInputRefusesInvalidUTF8(t *testing.T) {
	in := Input{Args: json.RawMessage(`{"command":"x","workdir":"/"}`), Secret: &Secret{Name: "API_TOKEN", Value: secret.New([]byte("ok\xff\xfe"))}}
	if _, err := in.MarshalJSON(); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("MarshalJSON with a non-UTF-8 secret = %v", err)
	}
	in.Secret.Value = secret.New([]byte("ok-é"))
	if _, err := in.MarshalJSON(); err != nil {
		t.Errorf("MarshalJSON with a UTF-8 secret = %v", err)
	}
}
