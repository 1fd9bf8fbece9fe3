package honcho

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"unicode/utf8"
)

// Limits copied from upstream.
const (
	maxIDLen     = 512    // src/schemas/api.py WorkspaceCreate/PeerCreate/SessionCreate: max_length=512
	maxBatch     = 100    // src/schemas/api.py MessageBatchCreate.messages: max_length=100
	maxContent   = 25_000 // src/config.py MAX_MESSAGE_SIZE default (line 1498), MessageCreate.content max_length
	maxLimit     = 100    // src/schemas/api.py MessageSearchOptions.limit: le=100
	maxQuery     = 10_000 // src/schemas/api.py DialecticOptions.query: max_length=10000
	maxObservers = 10     // src/config.py SESSION_OBSERVERS_LIMIT default (line 1492)
	maxPageSize  = 100    // fastapi-pagination Params.size: le=100 (the library's default Page)
	defPageSize  = 50     // fastapi-pagination Params.size default
)

// idPattern is RESOURCE_NAME_PATTERN (src/schemas/api.py line 45).
const idPattern = `^[a-zA-Z0-9_-]+$`

var idRE = regexp.MustCompile(idPattern)

// verr is one item of FastAPI's 422 body: pydantic v2's ErrorDetails as
// FastAPI's request_validation_exception_handler encodes them (type,
// loc, msg, input, ctx; fastapi/exception_handlers.py).
type verr struct {
	Type  string         `json:"type"`
	Loc   []any          `json:"loc"`
	Msg   string         `json:"msg"`
	Input any            `json:"input"`
	Ctx   map[string]any `json:"ctx,omitempty"`
}

// invalid writes FastAPI's body-validation answer: 422 with a list.
func invalid(w http.ResponseWriter, errs []verr) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string][]verr{"detail": errs})
}

// body is a decoded JSON object. pydantic's BaseModel ignores extra keys
// (no model here sets extra="forbid") and matches names exactly.
type body map[string]json.RawMessage

// parseBody decodes an object body; a body that is not JSON is FastAPI's
// json_invalid, one that is not an object pydantic's model_attributes_type.
func parseBody(w http.ResponseWriter, b []byte) (body, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || dec.More() {
		invalid(w, []verr{{Type: "json_invalid", Loc: []any{"body", 0}, Msg: "JSON decode error", Input: map[string]any{}, Ctx: map[string]any{"error": "Expecting value"}}})
		return nil, false
	}
	var m body
	if json.Unmarshal(b, &m) != nil || m == nil {
		invalid(w, []verr{{Type: "model_attributes_type", Loc: []any{"body"}, Msg: "Input should be a valid dictionary or object to extract fields from", Input: v}})
		return nil, false
	}
	return m, true
}

func (m body) input() any {
	var v any
	b, _ := json.Marshal(m)
	json.Unmarshal(b, &v)
	return v
}

func raw(r json.RawMessage) any {
	var v any
	dec := json.NewDecoder(bytes.NewReader(r))
	dec.UseNumber()
	dec.Decode(&v)
	return v
}

// str reads a string field; errs gains pydantic's error when it is
// missing (and required) or not a string.
func (m body) str(errs *[]verr, loc []any, key string, required bool) (string, bool) {
	r, ok := m[key]
	if !ok || string(r) == "null" && !required {
		if required {
			*errs = append(*errs, verr{Type: "missing", Loc: append(loc, key), Msg: "Field required", Input: m.input()})
		}
		return "", false
	}
	var s string
	if json.Unmarshal(r, &s) != nil {
		*errs = append(*errs, verr{Type: "string_type", Loc: append(loc, key), Msg: "Input should be a valid string", Input: raw(r)})
		return "", false
	}
	return s, true
}

// chars is len() of a Python str: code points.
func chars(s string) int { return utf8.RuneCountInString(s) }

// lengths adds pydantic's string_too_short / string_too_long.
func lengths(errs *[]verr, loc []any, s string, lo, hi int) bool {
	n := chars(s)
	switch {
	case n < lo:
		*errs = append(*errs, verr{Type: "string_too_short", Loc: loc, Msg: fmt.Sprintf("String should have at least %d %s", lo, plural(lo, "character")), Input: s, Ctx: map[string]any{"min_length": lo}})
		return false
	case n > hi:
		*errs = append(*errs, verr{Type: "string_too_long", Loc: loc, Msg: fmt.Sprintf("String should have at most %d %s", hi, plural(hi, "character")), Input: s, Ctx: map[string]any{"max_length": hi}})
		return false
	}
	return true
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// id checks a resource id field: Field(alias="id", min_length=1,
// max_length=512, pattern=RESOURCE_NAME_PATTERN) (src/schemas/api.py,
// WorkspaceCreate line 146, PeerCreate line 213, SessionCreate line 421).
func (m body) id(errs *[]verr) string {
	s, ok := m.str(errs, []any{"body"}, "id", true)
	if !ok || !lengths(errs, []any{"body", "id"}, s, 1, maxIDLen) {
		return ""
	}
	if !idRE.MatchString(s) {
		*errs = append(*errs, verr{Type: "string_pattern_mismatch", Loc: []any{"body", "id"}, Msg: "String should match pattern '" + idPattern + "'", Input: s, Ctx: map[string]any{"pattern": idPattern}})
		return ""
	}
	return s
}

// integer reads an int field bounded by ge and le, with default def.
func (m body) integer(errs *[]verr, loc []any, key string, def, ge, le int) int {
	r, ok := m[key]
	if !ok {
		return def
	}
	var n json.Number
	if json.Unmarshal(r, &n) != nil {
		*errs = append(*errs, verr{Type: "int_type", Loc: append(loc, key), Msg: "Input should be a valid integer", Input: raw(r)})
		return def
	}
	v, err := strconv.Atoi(n.String())
	if err != nil {
		*errs = append(*errs, verr{Type: "int_from_float", Loc: append(loc, key), Msg: "Input should be a valid integer, got a number with a fractional part", Input: raw(r)})
		return def
	}
	return bounded(errs, append(loc, key), v, ge, le)
}

func bounded(errs *[]verr, loc []any, v, ge, le int) int {
	switch {
	case v < ge:
		*errs = append(*errs, verr{Type: "greater_than_equal", Loc: loc, Msg: fmt.Sprintf("Input should be greater than or equal to %d", ge), Input: v, Ctx: map[string]any{"ge": ge}})
	case v > le:
		*errs = append(*errs, verr{Type: "less_than_equal", Loc: loc, Msg: fmt.Sprintf("Input should be less than or equal to %d", le), Input: v, Ctx: map[string]any{"le": le}})
	}
	return v
}

// validPeerName is crud/peer.py's check on the create path
// (_reject_impossible_peer_names and the non-conforming-name check in
// get_or_create_peers), which raises ValidationException: 422 with a
// string detail, not FastAPI's list.
func validPeerName(s string) bool {
	return chars(s) >= 1 && chars(s) <= maxIDLen && idRE.MatchString(s)
}
