package turn

import (
	"slices"
	"sync"

	"wntrmute.dev/boxmaker/pkg/model/chat"
)

// Images (issue 29). Replay gives a user message the images posted with
// it, unloaded; here, before each request, they are loaded for a model
// that can see, or dropped for one that cannot: llama-server refuses any
// image part without a vision projector ("image input is not
// supported", tools/server/server-common.cpp oaicompat_chat_params_parse),
// and a session that kept sending one would never answer again. An image
// is loaded the same way every time (the same bytes give the same data
// URL), so each request still extends the previous one and the server
// reuses its cached prefix, the image's tokens included.

// MaxImageCache bounds the data URLs the engine keeps between requests.
const MaxImageCache = 16

// Media loads one posted image of a session as a data URL.
type Media func(session, id, typ string) (string, error)

// Cached wraps load so that each image is read and encoded once while it
// is among the last MaxImageCache loaded: a session's every request
// carries its images again.
func Cached(load Media) Media {
	c := &imageCache{}
	return func(session, id, typ string) (string, error) {
		return c.get(session+"/"+id, func() (string, error) { return load(session, id, typ) })
	}
}

// imageCache keeps loaded data URLs by session and id.
type imageCache struct {
	mu    sync.Mutex
	urls  map[string]string
	order []string
}

func (c *imageCache) get(key string, load func() (string, error)) (string, error) {
	c.mu.Lock()
	if u, ok := c.urls[key]; ok {
		c.mu.Unlock()
		return u, nil
	}
	c.mu.Unlock()
	u, err := load()
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.urls == nil {
		c.urls = map[string]string{}
	}
	if _, ok := c.urls[key]; !ok {
		c.urls[key] = u
		c.order = append(c.order, key)
		if len(c.order) > MaxImageCache {
			delete(c.urls, c.order[0])
			c.order = c.order[1:]
		}
	}
	return u, nil
}

// withImages returns msgs with every image loaded (the model can see and
// a loader is set) or none (otherwise). msgs is the session's own list:
// it is copied before anything changes.
func (e *Engine) withImages(session string, msgs []chat.Message) []chat.Message {
	var out []chat.Message
	for i, m := range msgs {
		if len(m.Images) == 0 {
			continue
		}
		if out == nil {
			out = slices.Clone(msgs)
		}
		if !e.Vision || e.Media == nil {
			out[i].Images = nil
			continue
		}
		ims := make([]chat.Image, 0, len(m.Images))
		for _, im := range m.Images {
			u, err := e.Media(session, im.ID, im.Type)
			if err != nil {
				// Not shown: the descriptor line still says it was posted.
				continue
			}
			im.URL = u
			ims = append(ims, im)
		}
		out[i].Images = ims
	}
	if out == nil {
		return msgs
	}
	return out
}
