// Package matrixio is everything that talks to the Matrix homeserver: account
// login and registration with persisted credentials, one sync loop per account,
// sending with deterministic transaction ids, threads, edits, reactions,
// typing, room state, room provisioning, the admin facade and rate-limit
// back-off. It knows nothing of hooks, agents or plugins.
package matrixio
