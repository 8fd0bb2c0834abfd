package demo

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// printer writes the story: one line per step, indented detail lines, and
// dots while something is awaited. In quiet mode it writes only what is
// written with always.
type printer struct {
	w     io.Writer
	quiet bool

	mu      sync.Mutex
	dotting bool // a line of dots is open and must end before the next line
}

// step starts step n of the story.
func (p *printer) step(n int, format string, args ...any) {
	p.line(fmt.Sprintf("[%d/%d] ", n, steps) + fmt.Sprintf(format, args...))
}

// detail writes an indented line under the current step.
func (p *printer) detail(format string, args ...any) {
	p.line("      " + fmt.Sprintf(format, args...))
}

// block writes indented text, line by line.
func (p *printer) block(text string) {
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		p.line(strings.TrimRight("      "+l, " "))
	}
}

func (p *printer) line(s string) {
	if p.quiet {
		return
	}
	p.always(s)
}

// always writes a line even in quiet mode.
func (p *printer) always(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLineLocked()
	fmt.Fprintln(p.w, s)
}

// endLine ends an open line of dots, so that whatever is written next,
// here or elsewhere, starts on a line of its own.
func (p *printer) endLine() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLineLocked()
}

func (p *printer) endLineLocked() {
	if p.dotting {
		fmt.Fprintln(p.w)
		p.dotting = false
	}
}

// dot shows that a wait goes on.
func (p *printer) dot() {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.dotting {
		fmt.Fprint(p.w, "      ")
		p.dotting = true
	}
	fmt.Fprint(p.w, ".")
}

// dots prints a dot every interval until the returned stop is called; stop
// returns once no more dots can appear.
func (p *printer) dots(interval time.Duration) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.dot()
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// seconds prints a duration as seconds with one decimal, e.g. "1.5s".
func seconds(d time.Duration) string {
	return fmt.Sprintf("%.1fs", d.Seconds())
}
