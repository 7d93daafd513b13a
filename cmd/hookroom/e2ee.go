package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hookroom/hookroom/matrixio"
)

// envRecoveryKey is the environment variable matrix.encryption.recovery_key
// reads the recovery key from, as hookroom e2ee recovery-key writes it.
const envRecoveryKey = "HOOKROOM_RECOVERY_KEY"

const e2eeUsage = `Usage: hookroom e2ee recovery-key [--config FILE] [--env FILE] [--set] [--force]

Makes the recovery key of the agents' key backup: a new random key (or,
with --set, one read from standard input, e.g. the key saved before a lost
database) is written to the env file as HOOKROOM_RECOVERY_KEY and printed
once. Store it somewhere safe outside this machine: with it a fresh
database restores the agents' room keys; without it messages sent before
the loss cannot be read again. config.yaml reads it with

  matrix:
    encryption:
      recovery_key: ${HOOKROOM_RECOVERY_KEY}

An env file that already sets HOOKROOM_RECOVERY_KEY is left alone unless
--force is given: the accounts' secret storage is encrypted with the key
they first ran with, and another key turns their backup off.

`

// e2eeIO is what hookroom e2ee reads and writes.
type e2eeIO struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// runE2EE is hookroom e2ee. It returns the process exit code.
func runE2EE(args []string, rw e2eeIO) int {
	if len(args) == 0 || args[0] != "recovery-key" {
		if len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(rw.stdout, e2eeUsage)
			return 0
		}
		fmt.Fprint(rw.stderr, e2eeUsage)
		return 2
	}
	fs := flag.NewFlagSet("e2ee recovery-key", flag.ContinueOnError)
	fs.SetOutput(rw.stderr)
	fs.Usage = func() {
		fmt.Fprint(rw.stderr, e2eeUsage)
		fs.PrintDefaults()
	}
	cfgPath := fs.String("config", "config.yaml", "path to config.yaml (the env file defaults to hookroom.env next to it)")
	envPath := fs.String("env", "", "the env file to write HOOKROOM_RECOVERY_KEY to (mode 0600; created if missing)")
	set := fs.Bool("set", false, "read the recovery key from standard input instead of generating one")
	force := fs.Bool("force", false, "replace a HOOKROOM_RECOVERY_KEY the env file already sets")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(rw.stderr, "hookroom e2ee recovery-key: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *envPath == "" {
		*envPath = filepath.Join(filepath.Dir(*cfgPath), initEnvFile)
	}
	if err := recoveryKey(*cfgPath, *envPath, *set, *force, rw); err != nil {
		fmt.Fprintf(rw.stderr, "hookroom e2ee recovery-key: %v\n", err)
		return 1
	}
	return 0
}

// recoveryKey writes a new (or, with set, the given) recovery key to the
// env file at envPath and prints it.
func recoveryKey(cfgPath, envPath string, set, force bool, rw e2eeIO) error {
	old, err := os.ReadFile(envPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var kept []string
	replaced := false
	sc := bufio.NewScanner(strings.NewReader(string(old)))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimPrefix(strings.TrimSpace(line), "export "), envRecoveryKey+"=") {
			if !force {
				return fmt.Errorf("%s already sets %s: keep it (the agents' secret storage is encrypted with it), or give --force to replace it", envPath, envRecoveryKey)
			}
			replaced = true
			continue
		}
		kept = append(kept, line)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("failed to read %s: %w", envPath, err)
	}
	var key string
	if set {
		line, err := bufio.NewReader(rw.stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("failed to read the recovery key: %w", err)
		}
		key = strings.TrimSpace(line)
		if !matrixio.ValidRecoveryKey(key) {
			return errors.New("standard input holds no recovery key (48 base58 characters in groups of four, starting with Es)")
		}
	} else if key, err = matrixio.NewRecoveryKey(); err != nil {
		return err
	}
	text := strings.Join(kept, "\n")
	if text != "" {
		text += "\n"
	}
	text += "# The recovery key of the agents' key backup (hookroom e2ee recovery-key): matrix.encryption.recovery_key.\n"
	text += envRecoveryKey + "=" + shellQuote(key) + "\n"
	if err := writeFileAtomic(envPath, []byte(text), 0o600); err != nil {
		return fmt.Errorf("failed to write %s: %w", envPath, err)
	}
	w := rw.stdout
	if set {
		fmt.Fprintf(w, "Wrote the recovery key to %s (%s).\n", envPath, envRecoveryKey)
	} else {
		fmt.Fprintf(w, "Recovery key (shown once; it is also in %s as %s):\n\n    %s\n\n", envPath, envRecoveryKey, key)
		fmt.Fprintln(w, "Store it somewhere safe outside this machine: after a lost database it restores the agents' room keys.")
	}
	if replaced {
		fmt.Fprintln(w, "It replaces the previous key: accounts whose secret storage uses the previous one keep their backup off (docs/operations.md, \"Key backup and recovery\").")
	}
	if cfg, err := os.ReadFile(cfgPath); err != nil || !strings.Contains(string(cfg), "${"+envRecoveryKey+"}") {
		fmt.Fprintf(w, "Then set matrix.encryption.recovery_key: ${%s} in %s.\n", envRecoveryKey, cfgPath)
	}
	return nil
}
