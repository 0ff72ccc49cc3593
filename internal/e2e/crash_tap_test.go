package e2e_test

import (
	"bytes"
	"net/http"
	"os/exec"
	"time"
)

func (c *crashTap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/ilink/bot/sendmessage":
		c.fire(crashOnSend) // the request is in: the simulator handles it whatever happens next
		c.next.ServeHTTP(w, r)
		return
	case "/c2c/upload":
		c.next.ServeHTTP(w, r)
		c.mu.Lock()
		c.uploads++
		c.mu.Unlock()
		c.fire(crashOnUpload) // answered: the worker is about to record the upload and send
		return
	case "/ilink/bot/getupdates":
	default:
		c.next.ServeHTTP(w, r)
		return
	}
	c.mu.Lock()
	c.seq++
	c.lastArrival = time.Now()
	page := crashPage{seq: c.seq, epoch: c.epoch, at: c.lastArrival}
	if c.inflight == nil {
		c.inflight = map[int]time.Time{}
	}
	c.inflight[page.seq] = time.Now()
	c.mu.Unlock()
	rec := &crashBody{ResponseWriter: w}
	c.next.ServeHTTP(rec, r)
	page.ids = pageMessageIDs(rec.buf.Bytes())
	c.mu.Lock()
	delete(c.inflight, page.seq)
	if prev, ok := c.last[page.epoch]; !ok || page.seq > prev.seq {
		c.last[page.epoch] = page
	}
	if len(page.ids) > 0 {
		c.pages = append(c.pages, page)
		c.lastNonEmpty = max(c.lastNonEmpty, page.seq)
		if c.faultPage != nil {
			c.faultPage <- page // before the response leaves this handler
			c.faultPage = nil
		}
	}
	c.mu.Unlock()
	if len(page.ids) > 0 {
		c.fire(crashOnPage) // handed out: the worker is about to commit it
	}
}

// Kill triggers: the killer may wait for one of these moments instead of a plain timer.
const (
	crashOnTimer  = "timer"
	crashOnPage   = "page"        // a getupdates response with messages was handed out
	crashOnSend   = "sendmessage" // a sendmessage request reached the simulator
	crashOnUpload = "upload"      // a CDN upload was answered
)

// arm returns a channel closed at the next event of the given kind.
func (c *crashTap) arm(kind string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed, c.trigger = kind, make(chan struct{})
	return c.trigger
}

// armFault returns a channel that gets the next non-empty page, before its response
// reaches the worker (the fault then hits that page's commit).
func (c *crashTap) armFault() <-chan crashPage {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faultPage = make(chan crashPage, 1)
	return c.faultPage
}

func (c *crashTap) disarm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed, c.trigger = "", nil
}

func (c *crashTap) fire(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed == kind {
		close(c.trigger)
		c.armed, c.trigger = "", nil
	}
}

func (c *crashTap) setEpoch(e int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch = e
}

// caughtUp reports whether a getupdates request arrived after the latest one that was
// answered with messages (a poller fetches again only after it committed the page), and
// no request still being answered may carry messages. The simulator answers at once
// when it has messages, so a request held longer than crashHeldEmpty is an empty
// long-poll hold; a younger one may be handing out a page not yet recorded here.
func (c *crashTap) caughtUp() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, since := range c.inflight {
		if time.Since(since) < crashHeldEmpty {
			return false
		}
	}
	return c.seq > c.lastNonEmpty
}

// crashHeldEmpty is how long an unanswered getupdates must be held before the tap takes
// it for an empty long poll (the simulator's hold in this test is 500 ms).
const crashHeldEmpty = 300 * time.Millisecond

// handedOut maps each message id to the responses that carried it.
func (c *crashTap) handedOut() map[uint64][]crashPage {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[uint64][]crashPage{}
	for _, p := range c.pages {
		for _, id := range p.ids {
			out[id] = append(out[id], p)
		}
	}
	return out
}

// lastPageOf is the response to the latest getupdates request of a worker process.
func (c *crashTap) lastPageOf(epoch int) (crashPage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.last[epoch]
	return p, ok
}

// allPages are the responses that handed out messages.
func (c *crashTap) allPages() []crashPage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]crashPage(nil), c.pages...)
}

// pagesBetween counts the non-empty responses to requests that arrived between from and
// to, and their messages.
func (c *crashTap) pagesBetween(from, to time.Time) (pages, msgs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pages {
		if !p.at.Before(from) && p.at.Before(to) {
			pages++
			msgs += len(p.ids)
		}
	}
	return pages, msgs
}

// fetchedSince reports whether a getupdates request arrived after t.
func (c *crashTap) fetchedSince(t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastArrival.After(t)
}

func (c *crashTap) requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq
}

// uploadCount is the number of CDN uploads the simulator answered.
func (c *crashTap) uploadCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.uploads
}

func (c *crashTap) nonEmptyPages() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pages)
}

// crashBody copies a response body while it is written.
type crashBody struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (b *crashBody) Write(p []byte) (int, error) {
	b.buf.Write(p)
	return b.ResponseWriter.Write(p)
}

// crashProc is one worker process.
type crashProc struct {
	index, pid int
	cmd        *exec.Cmd
	log        *crashLog
	exited     chan struct{} // closed when the process is gone
	exitErr    error         // set before exited closes
	killed     bool          // SIGKILLed by the test
}
