package mattermost

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/secret"
)

// TestTLSCAFile: a server whose certificate only the CA file vouches for
// is refused without it and reached with it; the Bearer token is sent.
func TestTLSCAFile(t *testing.T) {
	var auth string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		w.Write([]byte(`{"id":"` + uid + `","username":"boxmaker","is_bot":true}`))
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	tok := secret.New([]byte("tok123"))
	plain, err := NewClient(srv.URL, tok, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Me(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA file: %v, want a certificate error", err)
	}
	withCA, err := NewClient(srv.URL, tok, ca)
	if err != nil {
		t.Fatal(err)
	}
	if me, err := withCA.Me(context.Background()); err != nil || me.ID != uid {
		t.Fatalf("with the CA file: %+v, %v", me, err)
	}
	if auth != "Bearer tok123" {
		t.Errorf("Authorization = %q", auth)
	}
}
