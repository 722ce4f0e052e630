package notify

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Retry bounds of a delivery.
const (
	defaultBackoff      = time.Second
	defaultMaxBackoff   = 30 * time.Second
	defaultMaxRetryWait = 5 * time.Minute
	// maxRemembered bounds how many sent keys a channel remembers for
	// repeat_interval, and for group_wait.
	maxRemembered = 4096
)

// ErrClosed is returned by Send after Close.
var ErrClosed = errors.New("notify: dispatcher closed")

// UnknownChannelError is returned by Send and Test for channel names that
// are not configured; the message still goes to the known ones.
type UnknownChannelError struct {
	Names []string
}

func (e *UnknownChannelError) Error() string {
	return "notify: unknown channel " + strings.Join(e.Names, ", ")
}

// ChannelStats counts what happened to one channel's messages.
type ChannelStats struct {
	Type       string
	Queued     int    // waiting in the queue now
	Sent       uint64 // delivered
	Failed     uint64 // given up after the last attempt, or refused for good
	Dropped    uint64 // pushed out of a full queue, oldest first
	Retried    uint64 // attempts repeated after a failure
	Merged     uint64 // folded into a group's follow-up within group_wait
	Suppressed uint64 // unchanged and not repeated within repeat_interval
}

// Option configures a Dispatcher.
type Option func(*options) error

type options struct {
	hc           *http.Client
	logger       *slog.Logger
	now          func() time.Time
	sleep        func(context.Context, time.Duration) error
	senders      map[string]Sender
	templates    map[Kind]string
	tlsConfig    *tls.Config
	backoff      time.Duration
	maxBackoff   time.Duration
	maxRetryWait time.Duration
}

// WithHTTPClient sets the client of the HTTP channels and the heartbeat. Its
// Timeout should be 0 or above the configured per-attempt timeout.
func WithHTTPClient(hc *http.Client) Option {
	return func(o *options) error {
		if hc == nil {
			return errors.New("nil HTTP client")
		}
		o.hc = hc
		return nil
	}
}

// WithLogger sets the logger for delivery failures, template errors and
// the log channel. A nil logger discards.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		o.logger = l
		return nil
	}
}

// WithClock sets the clock used for grouping, repeat_interval and message
// times.
func WithClock(now func() time.Time) Option {
	return func(o *options) error {
		if now == nil {
			return errors.New("nil clock")
		}
		o.now = now
		return nil
	}
}

// WithSleep sets how a worker waits between attempts; it must return early
// with ctx's error when ctx is done.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(o *options) error {
		if sleep == nil {
			return errors.New("nil sleep")
		}
		o.sleep = sleep
		return nil
	}
}

// WithSenders replaces the senders of configured channels, by name.
func WithSenders(s map[string]Sender) Option {
	return func(o *options) error {
		o.senders = s
		return nil
	}
}

// WithTemplates replaces the default template of some kinds; see
// TemplateData for what a template can use.
func WithTemplates(t map[Kind]string) Option {
	return func(o *options) error {
		o.templates = t
		return nil
	}
}

// WithTLSConfig sets the TLS configuration of the e-mail channels (for a
// private CA); nil means the system's roots.
func WithTLSConfig(c *tls.Config) Option {
	return func(o *options) error {
		o.tlsConfig = c
		return nil
	}
}

// WithBackoff sets the wait before the second attempt, doubled for each
// further one up to max, and the longest rate-limit hint honoured: a
// service asking to wait longer fails the message instead of stalling the
// channel.
func WithBackoff(first, max, maxHint time.Duration) Option {
	return func(o *options) error {
		if first <= 0 || max < first || maxHint <= 0 {
			return errors.New("backoff: need 0 < first <= max and maxHint > 0")
		}
		o.backoff, o.maxBackoff, o.maxRetryWait = first, max, maxHint
		return nil
	}
}

// Dispatcher routes messages to channels: it renders them, sends the first
// of a group at once and merges those that follow within group_wait,
// queues them per channel and delivers them from one worker per channel,
// so that a slow or dead channel delays nothing else.
type Dispatcher struct {
	cfg    Config
	opts   options
	render *renderer
	chans  map[string]*channel
	names  []string // sorted
	hb     *heartbeat

	wake     chan struct{} // a group is pending: the flusher recomputes its timer
	stop     chan struct{} // closed by Close: the flusher and heartbeat end
	draining chan struct{} // closed by Close: workers end once their queue is empty

	mu      sync.Mutex
	started bool
	closed  bool
	cancel  context.CancelFunc
	workers sync.WaitGroup
	aux     sync.WaitGroup
}

// channel is one destination with its queue and grouping state.
type channel struct {
	name   string
	sender Sender
	ready  chan struct{} // cap 1: the queue got a message

	mu     sync.Mutex
	buf    []Message // ring buffer of the queue
	head   int
	n      int
	groups *grouper
	last   map[string]sentRecord
	stats  ChannelStats
}

type sentRecord struct {
	content string
	at      time.Time
}

// NewDispatcher builds the senders of cfg's channels. Nothing is delivered
// before Start; Send already queues.
func NewDispatcher(cfg *Config, opts ...Option) (*Dispatcher, error) {
	if cfg == nil {
		return nil, errors.New("notify: nil config")
	}
	o := options{
		logger:       slog.New(slog.DiscardHandler),
		now:          time.Now,
		sleep:        sleepCtx,
		backoff:      defaultBackoff,
		maxBackoff:   defaultMaxBackoff,
		maxRetryWait: defaultMaxRetryWait,
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("notify: %w", err)
		}
	}
	if o.hc == nil {
		o.hc = &http.Client{}
	}
	c := *cfg
	if c.QueueSize <= 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	r, err := newRenderer(o.templates)
	if err != nil {
		return nil, fmt.Errorf("notify: %w", err)
	}
	d := &Dispatcher{
		cfg: c, opts: o, render: r, chans: map[string]*channel{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), draining: make(chan struct{}),
	}
	for name := range o.senders {
		if _, ok := c.Channels[name]; !ok {
			return nil, fmt.Errorf("notify: WithSenders: unknown channel %q", name)
		}
	}
	for _, name := range c.ChannelNames() {
		cc := c.Channels[name]
		s := o.senders[name]
		if s == nil {
			if s, err = d.newSender(cc); err != nil {
				return nil, fmt.Errorf("notify: channel %s: %w", name, err)
			}
		}
		d.chans[name] = &channel{
			name: name, sender: s, ready: make(chan struct{}, 1),
			buf: make([]Message, c.QueueSize), groups: newGrouper(c.GroupWait), last: map[string]sentRecord{},
			stats: ChannelStats{Type: cc.Type},
		}
		d.names = append(d.names, name)
	}
	for _, name := range c.Default {
		if d.chans[name] == nil {
			return nil, fmt.Errorf("notify: default channel %q is not configured", name)
		}
	}
	if c.HeartbeatURL != "" {
		d.hb = &heartbeat{url: c.HeartbeatURL, slot: make(chan bool, 1), redact: newRedactor().withURL(c.HeartbeatURL)}
	}
	return d, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Start launches one delivery worker per channel, the group flusher and
// the heartbeat. It returns at once; Close stops them.
func (d *Dispatcher) Start() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started || d.closed {
		return
	}
	d.started = true
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	for _, name := range d.names {
		ch := d.chans[name]
		d.workers.Add(1)
		go func() {
			defer d.workers.Done()
			d.work(ctx, ch)
		}()
	}
	d.aux.Add(1)
	go func() {
		defer d.aux.Done()
		d.flushLoop()
	}()
	if d.hb != nil {
		d.aux.Add(1)
		go func() {
			defer d.aux.Done()
			d.heartbeatLoop(ctx)
		}()
	}
}

// Send routes m to its channels (m.Channels, else the configured default,
// else every channel), groups it and queues it. It never blocks on
// delivery: it returns in microseconds whatever the channels do. A full
// queue drops its oldest message. The error reports unknown channel names
// (*UnknownChannelError) or a closed dispatcher, never a delivery.
func (d *Dispatcher) Send(ctx context.Context, m Message) error {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return ErrClosed
	}
	now := d.opts.now()
	if m.Time.IsZero() {
		m.Time = now
	}
	targets := m.Channels
	if len(targets) == 0 {
		targets = d.cfg.Default
	}
	if len(targets) == 0 {
		targets = d.names
	}
	var unknown []string
	pending := false
	for i, name := range targets {
		if slices.Contains(targets[:i], name) {
			continue
		}
		ch := d.chans[name]
		if ch == nil {
			unknown = append(unknown, name)
			continue
		}
		if d.offer(ch, m, now) {
			pending = true
		}
	}
	if pending {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
	if unknown != nil {
		return &UnknownChannelError{Names: unknown}
	}
	return nil
}

// offer groups m into ch: it is queued at once or merged into its key's
// follow-up (see grouper). It reports whether a new follow-up now waits.
func (d *Dispatcher) offer(ch *channel, m Message, now time.Time) bool {
	key := groupKey(m)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	g, waits := ch.groups.offer(key, m, now)
	if g == nil {
		ch.stats.Merged++
		return waits
	}
	d.release(ch, key, g, now)
	return false
}

// Flush releases every follow-up whose group_wait has ended by now into its
// channel's queue, and returns when the next one ends (zero when none
// waits). Start runs it on time; tests call it with a made-up now.
func (d *Dispatcher) Flush(now time.Time) time.Time {
	var next time.Time
	for _, name := range d.names {
		if t := d.flushChannel(d.chans[name], now, false); !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}

func (d *Dispatcher) flushChannel(ch *channel, now time.Time, all bool) time.Time {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	due, next := ch.groups.due(now, all)
	for _, g := range due {
		d.release(ch, g.key, g, now)
	}
	return next
}

// release renders g's message and queues it, unless it repeats what was
// last sent under its key within repeat_interval: a re-fire (the rule
// resolved in between, untold) is news, never held. ch.mu is held.
func (d *Dispatcher) release(ch *channel, key string, g *group, now time.Time) {
	m := g.msg
	m.Count = g.count
	if suppressible(m.Kind) && d.cfg.RepeatInterval > 0 && !g.refire {
		c := content(m)
		if l, ok := ch.last[key]; ok && l.content == c && now.Sub(l.at) < d.cfg.RepeatInterval {
			ch.stats.Suppressed++
			return
		}
		if len(ch.last) >= maxRemembered {
			ch.forget(now, d.cfg.RepeatInterval)
		}
		ch.last[key] = sentRecord{content: c, at: now}
	}
	text, err := d.render.render(m)
	if err != nil {
		d.opts.logger.Warn("notification template failed; default text used", "rule", m.Rule, "channel", ch.name, "err", err)
	}
	m.Text, m.Template = text, ""
	ch.push(m)
}

// forget drops the remembered keys older than repeat, and if that is not
// enough, half of the rest. ch.mu is held.
func (ch *channel) forget(now time.Time, repeat time.Duration) {
	for k, l := range ch.last {
		if now.Sub(l.at) >= repeat {
			delete(ch.last, k)
		}
	}
	drop := len(ch.last) - maxRemembered/2
	for k := range ch.last {
		if drop <= 0 {
			break
		}
		delete(ch.last, k)
		drop--
	}
}

// push appends m to the ring, dropping the oldest when full. ch.mu is held.
func (ch *channel) push(m Message) {
	if ch.n == len(ch.buf) {
		ch.buf[ch.head] = Message{}
		ch.head = (ch.head + 1) % len(ch.buf)
		ch.n--
		ch.stats.Dropped++
	}
	ch.buf[(ch.head+ch.n)%len(ch.buf)] = m
	ch.n++
	select {
	case ch.ready <- struct{}{}:
	default:
	}
}

func (ch *channel) pop() (Message, bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.n == 0 {
		return Message{}, false
	}
	m := ch.buf[ch.head]
	ch.buf[ch.head] = Message{}
	ch.head = (ch.head + 1) % len(ch.buf)
	ch.n--
	return m, true
}

// groupKey is what makes two messages "the same" for grouping and
// repeat_interval: one alert (rule and symbol) whatever its state — its
// transitions and its notify action's messages alike, so that a rule's
// resolution is seen between two of its firings —, one action on one
// symbol, or the words of a message about neither.
func groupKey(m Message) string {
	class, action := string(m.Kind), m.Action
	switch m.Kind {
	case KindFiring, KindResolved, KindNoData, KindRule:
		class, action = "state", "" // a notify action's message names its action
	}
	key := class + "\x00" + m.Rule + "\x00" + m.Symbol + "\x00" + action
	if m.Account != "" {
		key = m.Account + "\x00" + key // one account's alert never groups with another's
	}
	if m.Rule == "" && m.Symbol == "" {
		key += "\x00" + maskFigures(m.Text)
	}
	return key
}

// content is what must change for a message to be sent again within
// repeat_interval: its kind, severity and words; figures do not count.
func content(m Message) string {
	return string(m.Kind) + "\x00" + m.Severity + "\x00" + maskFigures(m.Text) + "\x00" + m.Template
}

// suppressible says whether a kind is held back by repeat_interval; what
// the guard did, its breaker and its life, and every change of a position
// it did not make (a liquidation above all) are always told.
func suppressible(k Kind) bool {
	switch k {
	case KindAction, KindActionFailed, KindBreaker, KindLifecycle, KindTest, KindLiquidation, KindPosition:
		return false
	}
	return true
}

// maskFigures replaces each run of digits (with its separators) by '#'.
func maskFigures(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	inNum := false
	for _, r := range s {
		isDigit := r >= '0' && r <= '9'
		if isDigit || (inNum && (r == '.' || r == ',')) {
			if !inNum {
				b.WriteByte('#')
				inNum = true
			}
			continue
		}
		inNum = false
		b.WriteRune(r)
	}
	return b.String()
}

// flushLoop releases groups when their group_wait ends, until Close.
func (d *Dispatcher) flushLoop() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		next := d.Flush(d.opts.now())
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(d.opts.now()), time.Millisecond)
		}
		t.Reset(wait)
		select {
		case <-d.stop:
			return
		case <-d.wake:
		case <-t.C:
		}
	}
}

// work delivers ch's queue until Close drains it or ctx is cancelled.
func (d *Dispatcher) work(ctx context.Context, ch *channel) {
	for ctx.Err() == nil {
		m, ok := ch.pop()
		if ok {
			_ = d.deliver(ctx, ch, m)
			continue
		}
		select {
		case <-ch.ready:
		case <-d.draining:
			if ch.queued() == 0 {
				return
			}
		case <-ctx.Done():
		}
	}
}

func (ch *channel) queued() int {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.n
}

func (ch *channel) count(f func(*ChannelStats)) {
	ch.mu.Lock()
	f(&ch.stats)
	ch.mu.Unlock()
}

// deliver makes up to MaxAttempts attempts, each bounded by Timeout, waiting
// between them as the service asked or with doubling backoff.
func (d *Dispatcher) deliver(ctx context.Context, ch *channel, m Message) error {
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
		err := ch.sender.Send(actx, m)
		cancel()
		if err == nil {
			ch.count(func(s *ChannelStats) { s.Sent++ })
			return nil
		}
		wait, retry := d.retryDelay(err, attempt)
		if ctx.Err() != nil || !retry || attempt >= d.cfg.MaxAttempts {
			ch.count(func(s *ChannelStats) { s.Failed++ })
			d.opts.logger.Error("notification not delivered", "channel", ch.name, "kind", string(m.Kind), "rule", m.Rule,
				"symbol", m.Symbol, "attempts", attempt, "err", err)
			return err
		}
		ch.count(func(s *ChannelStats) { s.Retried++ })
		d.opts.logger.Warn("notification attempt failed; retrying", "channel", ch.name, "attempt", attempt, "wait", wait, "err", err)
		if serr := d.opts.sleep(ctx, wait); serr != nil {
			ch.count(func(s *ChannelStats) { s.Failed++ })
			return err
		}
	}
}

// retryDelay says how long to wait before attempt+1, and whether to try.
func (d *Dispatcher) retryDelay(err error, attempt int) (time.Duration, bool) {
	var de *DeliveryError
	if errors.As(err, &de) {
		if de.Permanent {
			return 0, false
		}
		if de.RetryAfter > 0 {
			return de.RetryAfter, de.RetryAfter <= d.opts.maxRetryWait
		}
	}
	wait := d.opts.backoff
	for i := 1; i < attempt && wait < d.opts.maxBackoff; i++ {
		wait *= 2
	}
	return min(wait, d.opts.maxBackoff), true
}

// TestResult is one channel's answer to a test message: Err is nil when
// the channel took it.
type TestResult struct {
	Channel string
	Err     error
}

// Test sends a test message to one channel, or to every channel when name
// is empty, to all of them at once, synchronously and without grouping,
// with the usual retries. It returns each channel's own result in name
// order; its error is for a name that is no channel, or no channel at all.
func (d *Dispatcher) Test(ctx context.Context, name string) ([]TestResult, error) {
	names := d.names
	if name != "" {
		if d.chans[name] == nil {
			return nil, &UnknownChannelError{Names: []string{name}}
		}
		names = []string{name}
	}
	if len(names) == 0 {
		return nil, errors.New("notify: no channel configured")
	}
	out := make([]TestResult, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		out[i].Channel = n
		m := Message{Time: d.opts.now(), Kind: KindTest, Severity: "info", Text: "riskguard test message to channel " + n + ": notifications work"}
		text, _ := d.render.render(m)
		m.Text = text
		wg.Go(func() { out[i].Err = d.deliver(ctx, d.chans[n], m) })
	}
	wg.Wait()
	return out, nil
}

// Stats returns each channel's counters, by channel name.
func (d *Dispatcher) Stats() map[string]ChannelStats {
	out := make(map[string]ChannelStats, len(d.chans))
	for name, ch := range d.chans {
		ch.mu.Lock()
		s := ch.stats
		s.Queued = ch.n
		ch.mu.Unlock()
		out[name] = s
	}
	return out
}

// Close sends what is still grouped at once, stops accepting messages and
// waits until the queues are delivered or ctx is done; then it abandons
// the rest, stops every goroutine and says how many messages were lost.
// The daemon calls it after its "stopping" message.
func (d *Dispatcher) Close(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	started := d.started
	d.mu.Unlock()
	now := d.opts.now()
	for _, name := range d.names {
		d.flushChannel(d.chans[name], now, true)
	}
	close(d.draining)
	close(d.stop)
	var err error
	if started {
		// Workers end when their queue is empty, the flusher and heartbeat
		// at once (an in-flight ping is finished).
		done := make(chan struct{})
		go func() {
			d.workers.Wait()
			d.aux.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
		}
		d.cancel()
		<-done
	}
	lost := 0
	for _, name := range d.names {
		lost += d.chans[name].queued()
	}
	switch {
	case err != nil:
		return fmt.Errorf("notify: close: %d messages not delivered: %w", lost, err)
	case lost > 0:
		return fmt.Errorf("notify: close: %d messages not delivered (never started)", lost)
	}
	return nil
}
