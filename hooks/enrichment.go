package hooks

// CachePolicy tells how often an enrichment item is expected to change. It
// decides where the item lands in a rendered block so that prompt caches and
// replayed histories line up.
type CachePolicy string

const (
	// Volatile items may change on every message (time, weather). It is the
	// default: an item with an empty policy is volatile.
	Volatile CachePolicy = "volatile"
	// Stable items change rarely (a user's timezone, room tags).
	Stable CachePolicy = "stable"
)

// Normalize returns the policy with the empty value mapped to Volatile.
func (p CachePolicy) Normalize() CachePolicy {
	if p == "" {
		return Volatile
	}
	return p
}

// Valid reports whether p is one of the known policies (or empty).
func (p CachePolicy) Valid() bool {
	switch p {
	case "", Volatile, Stable:
		return true
	}
	return false
}

// EnrichmentItem is one piece of context that a message:enrich or
// system:enrich hook contributes. The enrich package renders items into the
// blocks the model sees.
type EnrichmentItem struct {
	// Key names the item; keep it stable across turns so replays line up.
	Key string `json:"key"`
	// Text is the item's content. It is escaped when rendered.
	Text string `json:"text"`
	// CachePolicy orders system items (stable first) and documents intent.
	CachePolicy CachePolicy `json:"cache_policy,omitempty"`
	// Transient items (message:enrich only) are sent to the model for this
	// turn but never stored in session history.
	Transient bool `json:"transient,omitempty"`
}

// ItemFlag adjusts an item added with AddMetadata or AddInstruction.
type ItemFlag uint8

const (
	// StableItem marks the item's cache policy as Stable.
	StableItem ItemFlag = 1 << iota
	// TransientItem keeps the item out of persisted history.
	TransientItem
)

func newItem(key, text string, flags []ItemFlag) EnrichmentItem {
	it := EnrichmentItem{Key: key, Text: text, CachePolicy: Volatile}
	for _, f := range flags {
		if f&StableItem != 0 {
			it.CachePolicy = Stable
		}
		if f&TransientItem != 0 {
			it.Transient = true
		}
	}
	return it
}
