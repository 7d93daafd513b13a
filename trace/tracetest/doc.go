// Package tracetest fills a trace store with realistic traces, for the
// benchmarks and tests of the trace store and of what reads it (the
// console's conversations page and turn inspector).
//
//	s := trace.New(db)
//	if err := s.Upgrade(ctx); err != nil { … }
//	newest := tracetest.Fill(tb, db, s, 100000)
//
// Sample(i, ended) is trace i of such a database: Agent(i), Room(i) and
// Sender(i) are the values filters pick from (5 agents, 50 rooms, 200
// senders). Fill writes its rows with multi-row inserts, much faster than
// a Save per trace, and checks that they read back as Save would have
// stored them.
package tracetest
