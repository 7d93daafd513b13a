// Package consoletest has fake backends for the console's pages, filled
// with sample data, for tests of the console and of the packages that mount
// it (as net/http/httptest is for net/http). Its XSS strings let a test
// check that whatever a person or plugin writes is shown as text.
package consoletest
