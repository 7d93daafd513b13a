package trace

import (
	"context"
	"fmt"
)

// The benchmarks of the store, with 100,000 realistic traces on SQLite and
// PostgreSQL, are BenchmarkStore in package tracetest, which fills the
// database: a test of package trace cannot import tracetest (it imports
// trace).

// planLines runs an EXPLAIN and returns its lines (the last column of each
// row: SQLite's detail, PostgreSQL's QUERY PLAN).
func planLines(ctx context.Context, s *Store, q string, args ...any) ([]string, error) {
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprint(vals[len(vals)-1]))
	}
	return out, rows.Err()
}
