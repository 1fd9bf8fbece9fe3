package clients

import (
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Shape is a JSON value's keys and types with its values left out:
// "string", "number", "bool", "null", "[" + the shapes of its elements
// (each distinct one once, sorted) + "]", or "{" + key:shape pairs in key
// order + "}". An empty body is "". Two requests agree when their bodies'
// shapes are equal.
func Shape(b []byte) string {
	if len(strings.TrimSpace(string(b))) == 0 {
		return ""
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "not JSON: " + err.Error()
	}
	return shape(v)
}

func shape(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		var parts []string
		for _, e := range x {
			if s := shape(e); !slices.Contains(parts, s) {
				parts = append(parts, s)
			}
		}
		slices.Sort(parts)
		return "[" + strings.Join(parts, "|") + "]"
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, strconv.Quote(k)+":"+shape(x[k]))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	return fmt.Sprintf("%T", v)
}

// QueryShape is a query string's keys, each with the type its value
// reads as (number, bool or string), sorted: "since=number&skip=bool".
func QueryShape(raw string) string {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return "bad query: " + err.Error()
	}
	var parts []string
	for k, vs := range q {
		for _, v := range vs {
			parts = append(parts, k+"="+scalar(v))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, "&")
}

func scalar(v string) string {
	if _, err := strconv.ParseInt(v, 10, 64); err == nil {
		return "number"
	}
	if v == "true" || v == "false" {
		return "bool"
	}
	return "string"
}

// Defaults are query parameters an official client sends with the value
// the server also takes when the parameter is absent: key to value. Each
// entry must cite the server code that reads it (docs/clients.md).
type Defaults map[string]string

// Without returns raw without the parameters d lists at their default
// value: what is left must match the other client's query.
func (d Defaults) Without(raw string) string {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return raw
	}
	for k, v := range d {
		if q.Get(k) == v {
			q.Del(k)
		}
	}
	return q.Encode()
}

// MultipartShape is a multipart/form-data body's shape: its parts in
// order, each as its form name, with "(file)" after a file part, joined
// by commas. The boundary is read from the body's first line, since the
// fake records no headers. A body that is not multipart says so.
func MultipartShape(b []byte) string {
	first, _, ok := strings.Cut(string(b), "\r\n")
	if !ok || !strings.HasPrefix(first, "--") {
		return "not multipart"
	}
	r := multipart.NewReader(strings.NewReader(string(b)), strings.TrimPrefix(first, "--"))
	var parts []string
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "not multipart: " + err.Error()
		}
		s := p.FormName()
		if p.FileName() != "" {
			s += "(file)"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ",")
}
