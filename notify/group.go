package notify

import (
	"cmp"
	"slices"
	"time"
)

// grouper decides, for one channel and per group key, when a message goes
// out. The first message of a quiet key goes at once; what follows under
// the key within group_wait of its last release waits and goes out as one
// follow-up, the latest message with the count of those it stands for,
// when the wait ends; that release starts a new wait, so a flapping key
// keeps being merged. A critical message goes at once even when its key is
// busy, unless a critical message of its kind went out under the key within
// group_wait: then it is merged too, or a flapping critical rule would
// flood — but for a re-fire: a critical message of a kind after a message
// of another kind came under the key (the rule resolved, then fired
// critically again) goes at once, standing for what waited, once per
// group_wait. A key is quiet again group_wait after its last release with
// nothing waiting.
//
// The bound this gives: a key's releases are at least group_wait apart,
// but for a critical message of a kind that has not gone out critically
// under the key within group_wait, and one re-fire of a kind per
// group_wait. So a key sends at most one message per group_wait, plus two
// per kind it sends critically: a rule flapping between critical firing
// and resolved, three (in practice two: the re-fire takes the place of
// the follow-up it stands for).
//
// It is owned by its channel and used under the channel's lock.
type grouper struct {
	wait time.Duration
	keys map[string]*keyState
}

// keyState is what a grouper remembers of one key.
type keyState struct {
	quietAt  time.Time          // group_wait after the key's last release
	pending  *group             // what came since, merged; goes out at pending.due
	critical map[Kind]time.Time // when a critical message of each kind last went out
	// between marks the critical kinds after whose last release a
	// message of another kind came (a rule resolved after it fired
	// critically): the next one of the kind is a re-fire, new word.
	between map[Kind]bool
	// refired is when a critical kind last went out at once as a re-fire
	// within group_wait of its previous release: once per group_wait,
	// so that a flapping rule stays bounded.
	refired map[Kind]time.Time
}

// group is a message with the count of those it stands for, and when it
// goes out.
type group struct {
	key   string
	msg   Message
	count int
	due   time.Time
	// refire: a critical message of a kind that went out critically
	// within group_wait, after the rule said something else (resolved):
	// news, which repeat_interval does not hold back.
	refire bool
}

func newGrouper(wait time.Duration) *grouper {
	return &grouper{wait: wait, keys: map[string]*keyState{}}
}

// offer takes m under key at now. It returns what to release at once, nil
// when m was merged into the key's waiting follow-up, and whether that
// follow-up is new (the flusher must then recompute its timer).
func (gr *grouper) offer(key string, m Message, now time.Time) (release *group, newWait bool) {
	if gr.wait <= 0 {
		return &group{key: key, msg: m, count: 1, due: now}, false
	}
	s := gr.keys[key]
	if s == nil {
		if len(gr.keys) >= maxRemembered {
			gr.prune(now)
		}
		s = &keyState{}
		gr.keys[key] = s
	}
	for k := range s.critical {
		if k != m.Kind {
			if s.between == nil {
				s.between = map[Kind]bool{}
			}
			s.between[k] = true
		}
	}
	busy := now.Before(s.quietAt) || s.pending != nil
	refire := critical(m) && s.sentCritical(m.Kind, now, gr.wait) && s.between[m.Kind] && !s.refiredWithin(m.Kind, now, gr.wait)
	if busy && !(critical(m) && (!s.sentCritical(m.Kind, now, gr.wait) || refire)) {
		if s.pending == nil {
			s.pending = &group{key: key, msg: m, count: 1, due: s.quietAt}
			return nil, true
		}
		s.pending.msg = m
		s.pending.count++
		return nil, false
	}
	g := &group{key: key, msg: m, count: 1, due: now}
	if s.pending != nil {
		// The critical message is the latest word on the key: it goes now
		// and stands for what waited.
		g.count += s.pending.count
		s.pending = nil
	}
	if refire {
		g.refire = true
		if s.refired == nil {
			s.refired = map[Kind]time.Time{}
		}
		s.refired[m.Kind] = now
	}
	s.released(m, now, gr.wait)
	return g, false
}

// due takes the follow-ups whose wait has ended by now (every one when
// all), in order of due time then key, and returns when the next one ends
// (zero when none waits). It forgets the keys that are quiet.
func (gr *grouper) due(now time.Time, all bool) ([]*group, time.Time) {
	var out []*group
	var next time.Time
	for key, s := range gr.keys {
		switch {
		case s.pending != nil && (all || !s.pending.due.After(now)):
			out = append(out, s.pending)
			s.released(s.pending.msg, now, gr.wait)
			s.pending = nil
		case s.pending != nil:
			if next.IsZero() || s.pending.due.Before(next) {
				next = s.pending.due
			}
		case !now.Before(s.quietAt):
			delete(gr.keys, key)
		}
	}
	slices.SortFunc(out, func(a, b *group) int {
		return cmp.Or(a.due.Compare(b.due), cmp.Compare(a.key, b.key))
	})
	return out, next
}

// prune forgets the quiet keys, and if that is not enough, half of those
// with nothing waiting: a forgotten key's next message goes at once.
func (gr *grouper) prune(now time.Time) {
	for k, s := range gr.keys {
		if s.pending == nil && !now.Before(s.quietAt) {
			delete(gr.keys, k)
		}
	}
	drop := len(gr.keys) - maxRemembered/2
	for k, s := range gr.keys {
		if drop <= 0 {
			break
		}
		if s.pending == nil {
			delete(gr.keys, k)
			drop--
		}
	}
}

// released notes that m went out under the key at now.
func (s *keyState) released(m Message, now time.Time, wait time.Duration) {
	s.quietAt = now.Add(wait)
	if critical(m) {
		if s.critical == nil {
			s.critical = map[Kind]time.Time{}
		}
		s.critical[m.Kind] = now
		delete(s.between, m.Kind)
	}
}

// refiredWithin says whether a critical message of kind went out at once
// as a re-fire under the key within wait before now.
func (s *keyState) refiredWithin(k Kind, now time.Time, wait time.Duration) bool {
	at, ok := s.refired[k]
	return ok && now.Sub(at) < wait
}

// sentCritical says whether a critical message of kind went out under the
// key within wait before now.
func (s *keyState) sentCritical(k Kind, now time.Time, wait time.Duration) bool {
	at, ok := s.critical[k]
	return ok && now.Sub(at) < wait
}

// critical says whether m must not wait for group_wait.
func critical(m Message) bool { return m.Severity == "critical" }
