package parley

import (
	"errors"
	"fmt"
)

// Error codes. They are part of the client contract (PROTOCOL.md): the HTTP
// layer maps each to one status in a single table, and the gateway closes a
// failed identify or resume with the close code whose row of CloseCodes
// (protocol.go) lists the error's code.
const (
	EINVALID      = "bad_request"      // 400
	EUNAUTHORIZED = "unauthorized"     // 401
	EFORBIDDEN    = "forbidden"        // 403
	EFEATUREOFF   = "feature_disabled" // 403: the workspace has the feature turned off
	ENOTFOUND     = "not_found"        // 404
	ECONFLICT     = "conflict"         // 409
	ELIMIT        = "limit_reached"    // 409: a cap on how many of something (Caps)
	ETOOLARGE     = "too_large"        // 413
	ERATELIMITED  = "rate_limited"     // 429
	EUNAVAILABLE  = "unavailable"      // 503
	EINTERNAL     = "internal"         // 500
)

// Error is an error that carries a code meant for clients and a message a
// person can read. Any other error is an internal one: its text never leaves
// the server.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("parley: %s: %s", e.Code, e.Message) }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL for
// any other error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the client-facing message of err: the message of its
// *Error, or a generic text for internal errors.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
