// Package adversarial holds tests only: hostile clients against a real
// Parley node (the HTTP API, the gateway, the embedded bus) on both stores,
// SQLite and PostgreSQL. They walk every route of the API with malformed,
// oversized and out-of-range input and check that the answer is always a
// clear client error that changes nothing, and they churn many sessions
// per user through channel membership while messages flow, checking that
// the node stays up and that every member still sees every message in
// order.
//
// Nothing here is imported by the server; the package exists for `go test`.
package adversarial
