package child

import "os"

// BaseEnv is the environment a child starts from before the variables
// config.yaml allows it: hookroom's PATH and LANG (or
// /usr/local/bin:/usr/bin:/bin and C.UTF-8 when unset or empty) and
// HOME=home. lookup reads hookroom's environment; nil means os.LookupEnv.
func BaseEnv(lookup func(string) (string, bool), home string) []string {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	get := func(name, def string) string {
		if v, ok := lookup(name); ok && v != "" {
			return v
		}
		return def
	}
	return []string{"PATH=" + get("PATH", "/usr/local/bin:/usr/bin:/bin"), "HOME=" + home, "LANG=" + get("LANG", "C.UTF-8")}
}
