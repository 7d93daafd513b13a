package bot

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"
)

// syncLoops runs one sync loop per managed account; accounts are added
// and removed while hookroom runs (reloads).
type syncLoops struct {
	mu      sync.Mutex
	ctx     context.Context
	stopAll context.CancelFunc
	cancel  map[id.UserID]context.CancelFunc
	wg      sync.WaitGroup
	first   error
}

func (s *syncLoops) start(ctx context.Context, stopAll context.CancelFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctx, s.stopAll = ctx, stopAll
	s.cancel = map[id.UserID]context.CancelFunc{}
}

// add starts e's sync loop. A loop that cannot go on (its access token was
// revoked) stops hookroom with an error.
func (s *syncLoops) add(b *Bot, e entity) {
	s.mu.Lock()
	defer s.mu.Unlock()
	user := e.account.UserID()
	if _, running := s.cancel[user]; running {
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.cancel[user] = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := e.account.Run(ctx, syncSink{b})
		if err == nil || errors.Is(err, context.Canceled) || ctx.Err() != nil {
			return
		}
		zerolog.Ctx(ctx).Error().Err(err).Stringer("account", user).Msg("sync loop stopped; stopping hookroom")
		s.mu.Lock()
		if s.first == nil {
			s.first = fmt.Errorf("sync loop of %s stopped: %w", user, err)
		}
		s.mu.Unlock()
		s.stopAll()
	}()
}

// remove stops user's sync loop (an agent removed from config.yaml).
func (s *syncLoops) remove(user id.UserID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cancel, ok := s.cancel[user]; ok {
		cancel()
		delete(s.cancel, user)
	}
}

func (s *syncLoops) wait() { s.wg.Wait() }

func (s *syncLoops) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first
}
