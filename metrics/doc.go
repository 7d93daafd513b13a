// Package metrics owns hookroom's Prometheus metrics: what is counted while
// hookroom runs (turn stages and outcomes, model requests and tokens,
// Matrix retries, reloads, inbox replays) and what is read from the engine
// at scrape time (per-hook run statistics, the inbox backlog, process
// plugin state). It follows the Prometheus naming conventions: a hookroom_
// prefix, base units in the name (_seconds), _total for counters.
//
// A Metrics is safe for concurrent use; its methods are cheap enough for
// the hot path (one atomic add or histogram observation each). Methods on a
// nil *Metrics do nothing, so code that runs without metrics (tests,
// hookroom check) needs no special case.
//
// metrics/metricstest parses the exposition text for tests.
package metrics
