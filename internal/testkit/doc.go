// Package testkit holds the helpers the tests of every package share, so no
// test file carries its own copy: Buffer, a log sink safe for concurrent
// writers, and Eventually, the one way a test waits on a condition.
//
// Tests wait on conditions, never sleep to prove that something did not
// happen: to show an absence, send a barrier (a later message, a later
// call) and wait for it with Eventually.
package testkit
