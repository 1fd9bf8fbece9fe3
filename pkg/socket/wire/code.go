package wire

import (
	"errors"
	"strings"
)

// # Approval codes
//
// Every pending approval has a code that only its real post (and bxctl
// approvals) shows, and every answer must repeat it: an approval's id is
// a sequence number anyone can read off the thread, so text the model
// wrote could imitate an approval's layout and ask the owner to answer
// it; the model never sees the code. brokerd draws it; this is only its
// spelling.

// ApprovalCodeAlphabet is Crockford's base32 in lower case: digits and
// letters without i, l, o and u, so no two symbols look alike.
const ApprovalCodeAlphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// ApprovalCodeLen is a code's length: 6 symbols of 32, 30 random bits.
const ApprovalCodeLen = 6

// ErrApprovalCode is a code that is not of the form [ParseApprovalCode]
// reads.
var ErrApprovalCode = errors.New("an approval code is 6 letters and digits, as the approval shows it")

// ParseApprovalCode reads a code as a person types it: any case, and the
// letters Crockford reads as digits (i and l as 1, o as 0). It returns
// the canonical spelling, or [ErrApprovalCode].
func ParseApprovalCode(s string) (string, error) {
	if len(s) != ApprovalCodeLen {
		return "", ErrApprovalCode
	}
	b := []byte(strings.ToLower(s))
	if len(b) != ApprovalCodeLen {
		return "", ErrApprovalCode
	}
	for i, c := range b {
		switch c {
		case 'i', 'l':
			b[i] = '1'
		case 'o':
			b[i] = '0'
		}
		if strings.IndexByte(ApprovalCodeAlphabet, b[i]) < 0 {
			return "", ErrApprovalCode
		}
	}
	return string(b), nil
}
