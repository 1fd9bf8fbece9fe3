package honcho

import (
	"reflect"
	"testing"
)

// FuzzDecodePage: whatever DecodePage accepts re-encodes, in Honcho's
// shape, to bytes it decodes to the same page; whatever it refuses
// yields the zero page.
func FuzzDecodePage(f *testing.F) {
	f.Add([]byte(`{"items":` + seedMsgs + `,"total":1,"page":1,"size":50,"pages":1}`))
	f.Add([]byte(`{"items":[],"total":0,"page":1,"size":50,"pages":0}`))
	f.Add([]byte(`{"items":[],"total":0,"page":1,"size":50,"pages":0,"links":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodePage(b)
		if err != nil {
			if !reflect.DeepEqual(p, Page{}) {
				t.Fatalf("refused input left data: %+v", p)
			}
			return
		}
		if int64(len(p.Items)) > p.Size || p.Size > MaxPageSize || p.Page < 1 {
			t.Fatalf("accepted an impossible page: %+v", p)
		}
		js := pageJSON{Items: make([]messageJSON, len(p.Items)), Total: p.Total, Page: p.Page, Size: p.Size, Pages: p.Pages}
		for i, m := range p.Items {
			js.Items[i] = messageJSON{m.ID, m.Content, m.Peer.String(), m.Session.String(), m.Metadata, stampOf(m.CreatedAt), m.Workspace.String(), m.TokenCount}
		}
		again, err := DecodePage(reencode(t, js))
		if err != nil || len(again.Items) != len(p.Items) || again.Total != p.Total || again.Pages != p.Pages {
			t.Fatalf("round trip: %+v, %v; was %+v", again, err, p)
		}
		for i := range p.Items {
			if again.Items[i].Content != p.Items[i].Content || again.Items[i].ID != p.Items[i].ID {
				t.Fatalf("round trip [%d]: %+v; was %+v", i, again.Items[i], p.Items[i])
			}
		}
	})
}
