package forge

import (
	"errors"
	"net/http"
)

// Webhook rejections; each maps to an HTTP status with StatusOf.
var (
	// ErrNoSignature: the delivery carries no signature header vouch accepts.
	ErrNoSignature = errors.New("webhook: missing signature")
	// ErrBadSignature: the signature does not match the body and secret.
	ErrBadSignature = errors.New("webhook: signature mismatch")
	// ErrTooLarge: the body exceeds MaxWebhookBody.
	ErrTooLarge = errors.New("webhook: body too large")
	// ErrMalformed: the signed body is not a payload vouch can read.
	ErrMalformed = errors.New("webhook: malformed payload")
	// ErrUnknownEvent: the event header names no event vouch knows.
	ErrUnknownEvent = errors.New("webhook: unknown event")
)

// ErrIgnored marks a verified delivery that needs no action (a comment on a
// plain issue, an edited comment, a label change, a ping, the bot's own
// comment). The handler answers it 2xx and queues nothing.
var ErrIgnored = errors.New("webhook: ignored")

// StatusOf maps a webhook error to the HTTP status to answer with.
func StatusOf(err error) int {
	switch {
	case err == nil:
		return http.StatusAccepted
	case errors.Is(err, ErrIgnored):
		return http.StatusOK
	case errors.Is(err, ErrNoSignature), errors.Is(err, ErrBadSignature):
		return http.StatusUnauthorized
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrMalformed), errors.Is(err, ErrUnknownEvent):
		return http.StatusBadRequest
	default:
		return http.StatusInternalServerError
	}
}

// WebhookParser verifies and parses one forge's webhook deliveries. Verify
// runs before any parsing, over the raw body, in constant time.
type WebhookParser interface {
	// Parse verifies header's signature over body and returns the event.
	Parse(header http.Header, body []byte) (*Event, error)
}
