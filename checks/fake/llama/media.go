package llama

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// Image parts, as tools/server/server-common.cpp oaicompat_chat_params_parse
// reads them (llama.cpp at 006639c3): for each message whose content is an
// array, a part of type "image_url" is refused unless the model can see
// (opt.allow_image, what /props reports as modalities.vision) with the
// runtime_error "image input is not supported - hint: if this is
// unexpected, you may need to provide the mmproj", which the server
// answers as a 500 server_error; otherwise handle_media takes its
// image_url.url: an http(s) URL is downloaded (the fake refuses it: it
// reaches no network), and anything else must be "data:image/...;base64,"
// and the base64 data, split on ',' into exactly two parts ("Invalid url
// value", "Invalid url format: ...", "url must be base64 encoded", all
// runtime_errors). The part then becomes the media marker in the
// template's text; any type but "text", "image_url" and "input_audio" is
// invalid_argument ("unsupported content[].type"), a 400.
//
// In the prompt, mtmd replaces the marker by the image's tokens, which
// match an earlier request's only for the same image (server_tokens::
// get_common_prefix compares the chunks' ids). The fake renders the
// marker followed by a digest of the image's bytes, so its token cache
// reuses a prefix holding the same image and no other.

// contentPart is one element of an array content.
type contentPart struct {
	Type     string  `json:"type"`
	Text     *string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// checkMedia applies the parse's rules to every message's parts.
func checkMedia(msgs []chatMessage, vision bool) *apiError {
	for _, m := range msgs {
		var parts []contentPart
		if json.Unmarshal(m.Content, &parts) != nil {
			continue // a string, null, or not an array: the template judges it
		}
		for _, p := range parts {
			switch p.Type {
			case "text":
			case "image_url":
				if !vision {
					return errServer("image input is not supported - hint: if this is unexpected, you may need to provide the mmproj")
				}
				url := ""
				if p.ImageURL != nil {
					url = p.ImageURL.URL
				}
				if _, err := mediaData(url); err != nil {
					return err
				}
			case "input_audio":
				return errServer("audio input is not supported - hint: if this is unexpected, you may need to provide the mmproj")
			default:
				return errInvalid("unsupported content[].type")
			}
		}
	}
	return nil
}

// mediaData is handle_media for a data URL.
func mediaData(url string) ([]byte, *apiError) {
	if strings.HasPrefix(url, "http://") || strings.HasPrefix(url, "https://") {
		return nil, errServer("the fake llama-server downloads no image: send a data URL")
	}
	parts := strings.Split(url, ",")
	switch {
	case len(parts) != 2:
		return nil, errServer("Invalid url value")
	case !strings.HasPrefix(parts[0], "data:image/"):
		return nil, errServer("Invalid url format: " + parts[0])
	case !strings.HasSuffix(parts[0], "base64"):
		return nil, errServer("url must be base64 encoded")
	}
	b, err := base64.StdEncoding.DecodeString(parts[1])
	if err != nil {
		// Reference: base64_decode stops at the first character that is
		// not base64; the fake is stricter and says so.
		return nil, errServer("the fake llama-server could not decode the image's base64")
	}
	return b, nil
}

// mediaText is what the fake's template renders for an image part: the
// marker and a digest of the image.
func mediaText(url string) string {
	b, _ := mediaData(url)
	sum := sha256.Sum256(b)
	return mediaMarker + "[image " + hex.EncodeToString(sum[:8]) + "]"
}

// mediaMarker is mtmd_default_marker(), also /props media_marker.
const mediaMarker = "<__media__>"

// ImageParts returns the data URLs of the image parts of a request body's
// messages, in order: what a test checks the client sent.
func ImageParts(body []byte) []string {
	var req struct {
		Messages []chatMessage `json:"messages"`
	}
	json.Unmarshal(body, &req)
	var out []string
	for _, m := range req.Messages {
		var parts []contentPart
		if json.Unmarshal(m.Content, &parts) != nil {
			continue
		}
		for _, p := range parts {
			if p.Type == "image_url" && p.ImageURL != nil {
				out = append(out, p.ImageURL.URL)
			}
		}
	}
	return out
}
