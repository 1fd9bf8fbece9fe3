package honcho

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// Sentinels an [*APIError] matches with errors.Is, by status. The
// statuses are HonchoException's subclasses (src/exceptions.py).
var (
	ErrNotFound    = errors.New("honcho: not found")                  // 404 ResourceNotFoundException
	ErrValidation  = errors.New("honcho: request refused as invalid") // 422 ValidationException, FilterError, FastAPI body validation
	ErrConflict    = errors.New("honcho: conflict")                   // 409 ConflictException
	ErrAuth        = errors.New("honcho: key refused")                // 401 AuthenticationException, 403 AuthorizationException
	ErrDisabled    = errors.New("honcho: feature disabled")           // 405 DisabledException
	ErrServer      = errors.New("honcho: server error")               // 5xx
	ErrUndecodable = errors.New("honcho: response does not decode")   // a 2xx body of the wrong shape
	ErrUnexpected  = errors.New("honcho: unexpected status")          // anything else (a redirect, 400 ObserverException, 413, 415)
)

// APIError is a non-2xx answer from Honcho.
type APIError struct {
	Op     string // the request, e.g. "get or create workspace"
	Status int
	// Detail is Honcho's "detail" string, or the validation errors'
	// messages joined; empty when the body was not Honcho's error shape
	// (Shaped is then false: a proxy's page, say). Capped and stripped of
	// control characters, since it is logged.
	Detail string
	Shaped bool
	// Fields are the locations FastAPI named in a 422 ("body.messages.0.content").
	Fields []string
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: honcho answered %d", e.Op, e.Status)
	switch {
	case e.Detail != "":
		fmt.Fprintf(&b, ": %s", e.Detail)
	case !e.Shaped:
		b.WriteString(" with a body that is not Honcho's error shape")
	}
	if len(e.Fields) > 0 {
		fmt.Fprintf(&b, " (at %s)", strings.Join(e.Fields, ", "))
	}
	return b.String()
}

// Is matches the sentinel for e's status.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == 404
	case ErrValidation:
		return e.Status == 422
	case ErrConflict:
		return e.Status == 409
	case ErrAuth:
		return e.Status == 401 || e.Status == 403
	case ErrDisabled:
		return e.Status == 405
	case ErrServer:
		return e.Status >= 500
	case ErrUnexpected:
		switch e.Status {
		case 404, 422, 409, 401, 403, 405:
			return false
		}
		return e.Status < 500
	}
	return false
}

// errorBody is every error Honcho sends: {"detail": "..."} from its
// exception handlers (src/main.py honcho_exception_handler,
// global_exception_handler, FastAPI's HTTPException) or {"detail": [...]}
// from FastAPI's request validation.
type errorBody struct {
	Detail json.RawMessage `json:"detail"`
}

// validationError is one item of FastAPI's 422 list (pydantic v2's
// ErrorDetails). Input echoes what was sent, message text included: it
// is decoded only as raw bytes and never kept.
type validationError struct {
	Type  string            `json:"type"`
	Loc   []json.RawMessage `json:"loc"`
	Msg   string            `json:"msg"`
	Input json.RawMessage   `json:"input,omitempty"`
	Ctx   json.RawMessage   `json:"ctx,omitempty"`
	URL   string            `json:"url,omitempty"`
}

// maxDetail caps the detail kept in an error.
const maxDetail = 300

// DecodeError turns an error response into an [*APIError]. It never fails:
// a body of another shape gives an error with Shaped false.
func DecodeError(op string, status int, body []byte) *APIError {
	e := &APIError{Op: op, Status: status}
	var eb errorBody
	if strict.Unmarshal(body, &eb) != nil {
		return e
	}
	var s string
	if strict.Unmarshal(eb.Detail, &s) == nil {
		e.Detail, e.Shaped = clean(s), true
		return e
	}
	var list []validationError
	if strict.Unmarshal(eb.Detail, &list) != nil {
		return e
	}
	e.Shaped = true
	var msgs []string
	for _, v := range list {
		msgs = append(msgs, v.Msg)
		var parts []string
		for _, l := range v.Loc {
			parts = append(parts, strings.Trim(string(l), `"`))
		}
		e.Fields = append(e.Fields, clean(strings.Join(parts, ".")))
		if len(e.Fields) == 5 {
			break
		}
	}
	e.Detail = clean(strings.Join(msgs, "; "))
	return e
}

// clean drops control characters and caps s, as it goes to a log.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029 {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > maxDetail {
		s = string(r[:maxDetail]) + "…"
	}
	return s
}
