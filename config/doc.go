// Package config owns config.yaml: its schema, the defaults of every field,
// ${VAR} substitution, strict decoding with errors that name file:line and the
// key path, validation, and the difference between two configurations (which
// hot reload uses to decide what to restart).
package config
