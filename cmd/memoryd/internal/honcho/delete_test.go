package honcho

import (
	"context"
	"errors"
	"net/http"
	"testing"

	fake "wntrmute.dev/boxmaker/checks/fake/honcho"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
)

// TestDeleteSession: 202 marks the session inactive (new messages to it
// are refused until Honcho's deletion job runs); deleting it again, or a
// session never made, is a 404 that counts as deleted; a server error is
// an error.
func TestDeleteSession(t *testing.T) {
	f := fake.New(t, fake.Options{})
	c := clientFor(t, f.URL, "", honchoconf.DefaultTimeout)
	ctx := context.Background()
	w, s, p := honchoconf.MustID("ws1"), honchoconf.MustID("s1"), honchoconf.MustID("owner")
	if _, err := c.AddMessages(ctx, w, s, []NewMessage{{Peer: p, Content: "a fact"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSession(ctx, w, s); err != nil {
		t.Fatalf("DeleteSession = %v", err)
	}
	if _, err := c.AddMessages(ctx, w, s, []NewMessage{{Peer: p, Content: "another"}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a message to a session being deleted = %v, want not found", err)
	}
	if len(f.Messages()) != 1 {
		t.Errorf("the fake dropped messages before its deletion job ran")
	}
	if err := c.DeleteSession(ctx, w, s); err != nil {
		t.Errorf("second DeleteSession = %v, want nil (404: gone already)", err)
	}
	f.RunDeletions()
	if len(f.Messages()) != 0 {
		t.Errorf("messages after the deletion job: %+v", f.Messages())
	}
	if err := c.DeleteSession(ctx, w, honchoconf.MustID("never")); err != nil {
		t.Errorf("DeleteSession of a session never made = %v", err)
	}
	f.SetFailure(http.StatusInternalServerError)
	if err := c.DeleteSession(ctx, w, honchoconf.MustID("x")); !errors.Is(err, ErrServer) {
		t.Errorf("DeleteSession on a 500 = %v", err)
	}
}
