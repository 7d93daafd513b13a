// Package runes cuts text to a size without breaking a UTF-8 sequence:
// hookroom's one truncation helper, for log lines, notices, traces and
// anything else shown to a person or an operator.
package runes
