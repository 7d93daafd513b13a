package config_test

import (
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/hookroom/hookroom/config"
)

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		in      string
		want    config.ByteSize
		wantErr bool
	}{
		{in: "0", want: 0},
		{in: "1024", want: 1024},
		{in: "100B", want: 100},
		{in: "256KiB", want: 256 << 10},
		{in: "256 kib", want: 256 << 10},
		{in: "20MiB", want: 20 << 20},
		{in: "1.5MiB", want: 3 << 19},
		{in: "1GiB", want: 1 << 30},
		{in: "500KB", want: 500_000},
		{in: "20MB", want: 20_000_000},
		{in: "", wantErr: true},
		{in: "MiB", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "20 furlongs", wantErr: true},
		{in: "1.2.3MiB", wantErr: true},
		{in: "99999999999GiB", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := config.ParseByteSize(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseByteSize(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParseByteSize(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestByteSizeStringAndYAML(t *testing.T) {
	tests := []struct {
		size config.ByteSize
		str  string
		yaml string
	}{
		{size: 100, str: "100 B", yaml: "100\n"},
		{size: 256 << 10, str: "256 KiB", yaml: "256KiB\n"},
		{size: 20 << 20, str: "20 MiB", yaml: "20MiB\n"},
		{size: 3 << 19, str: "1.5 MiB", yaml: "1.5MiB\n"},
		{size: 1500, str: "1.5 KiB", yaml: "1500\n"},
	}
	for _, tt := range tests {
		if got := tt.size.String(); got != tt.str {
			t.Errorf("ByteSize(%d).String() = %q, want %q", tt.size, got, tt.str)
		}
		out, err := yaml.Marshal(tt.size)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != tt.yaml {
			t.Errorf("yaml of %d = %q, want %q", tt.size, out, tt.yaml)
		}
		back, err := config.ParseByteSize(string(out[:len(out)-1]))
		if err != nil || back != tt.size {
			t.Errorf("yaml of %d does not read back: %d, %v", tt.size, back, err)
		}
	}
}
