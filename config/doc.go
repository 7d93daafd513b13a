// Package config owns config.yaml: its schema, the defaults of every field,
// ${VAR} substitution, strict decoding with errors that name file:line and the
// key path, validation, and the difference between two configurations (which
// hot reload uses to decide what to restart).
//
// Load reads a file and returns a *Config that is decoded, defaulted and
// validated, or an ErrorList with every problem found, each an *Error such as
//
//	config.yaml:12: plugins[0].settings.api_key: environment variable OPENWEATHER_API_KEY is not set
//
// Other packages point their own configuration problems at the file with
// Config.Errorf. A *Config is treated as immutable once loaded: a reload loads
// a new one and compares the two with Diff.
//
// Secrets (API keys, registration secrets and tokens, the database URI) have
// the type Secret, which prints as "REDACTED"; Config.String, MarshalYAML and
// MarshalJSON write the Redacted form, which also masks secret-looking plugin
// settings.
//
// The operator console edits config.yaml as text, keeping comments and
// formatting: MaskText shows it with secrets masked, Unmask puts them back
// into an edited text, Check runs the checks of a load on it (errors at
// file:line), DiffText previews the change, and WriteFile replaces the
// file atomically unless it changed on disk since it was read (ErrStale;
// compare with Hash). See text.go for the sequence.
package config
