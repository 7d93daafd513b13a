// Package metricstest reads Prometheus exposition text in tests: it parses
// a /metrics body with the Prometheus text parser (never by grepping) and
// finds series by name and labels.
package metricstest
