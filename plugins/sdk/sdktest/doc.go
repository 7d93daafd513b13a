// Package sdktest holds test support shared by the tests of plugins and
// their SDKs: the harness an SDK's test plugin runs in and the checks
// that the Go and the Python SDK's test plugins both pass (they implement
// the same hooks and tools), and the loop that benchmarks a hook round
// trip. Test packages import it; hookroom itself does not.
package sdktest
