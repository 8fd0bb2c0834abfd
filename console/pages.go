package console

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/receipt/issue"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed assets
var assetFiles embed.FS

// refreshSeconds is how often a page showing work in progress reloads
// itself, with a meta refresh rather than a script.
const refreshSeconds = 2

// viewer is the signed-in approver a page is rendered for.
type viewer struct {
	tenant, credential, csrf string
}

type viewerKey struct{}

func withViewer(ctx context.Context, v *viewer) context.Context {
	return context.WithValue(ctx, viewerKey{}, v)
}

func viewerFrom(ctx context.Context) *viewer {
	v, _ := ctx.Value(viewerKey{}).(*viewer)
	return v
}

type gateCtx struct {
	g *gate
	s *session
}

func withGate(ctx context.Context, g *gate, s *session) context.Context {
	return context.WithValue(ctx, gateKey{}, gateCtx{g, s})
}

func gateFrom(ctx context.Context) (*gate, *session) {
	v, _ := ctx.Value(gateKey{}).(gateCtx)
	return v.g, v.s
}

// page is what every template is rendered with.
type page struct {
	Title      string
	Tenant     string
	Credential string
	CSRF       string
	// Error is shown at the top of the page.
	Error string
	// Refresh reloads the page after this many seconds; zero never.
	Refresh int
	Data    any
}

// templates holds each page parsed with the layout.
type templates struct {
	pages map[string]*template.Template
}

func parseTemplates() (*templates, error) {
	t := &templates{pages: map[string]*template.Template{}}
	for _, name := range []string{"signin", "inbox", "request", "operations", "operation", "receipt", "spend", "budgets", "budget", "error"} {
		p, err := template.New(name).Funcs(template.FuncMap{
			"stamp": stamp, "visible": visible, "decision": decision, "seg": url.PathEscape, "operationPath": operationPath, "jsonText": jsonText, "prev": func(n int) int { return n - 1 },
		}).ParseFS(templateFiles, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: parse the %s page: %w", name, err)
		}
		t.pages[name] = p
	}
	return t, nil
}

// stamp prints a time as the receipts do; the zero time as a dash.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// render writes the named page, filling in who views it.
func (c *Console) render(w http.ResponseWriter, r *http.Request, name string, status int, p *page) {
	if v := viewerFrom(r.Context()); v != nil {
		p.Tenant, p.Credential, p.CSRF = v.tenant, v.credential, v.csrf
	}
	var b bytes.Buffer
	if err := c.tmpl.pages[name].ExecuteTemplate(&b, "layout", p); err != nil {
		c.log.ErrorContext(r.Context(), "console page", "page", name, "err", err)
		http.Error(w, "the console could not render this page; the gateway log has the details", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, "signin", status, &page{Title: "Sign in", Error: msg})
}

// fail answers with the error page; err, when set, goes to the log.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error, status int, msg string) {
	if err != nil {
		c.log.ErrorContext(r.Context(), "console", "path", r.URL.Path, "err", err)
	}
	c.render(w, r, "error", status, &page{Title: http.StatusText(status), Error: msg})
}

func serveAsset(w http.ResponseWriter, r *http.Request) {
	sub, _ := fs.Sub(assetFiles, "assets")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	http.StripPrefix(Prefix+"/assets/", http.FileServerFS(sub)).ServeHTTP(w, r)
}

func (c *Console) routes() {
	toInbox := func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"/inbox", http.StatusSeeOther)
	}
	c.pages.HandleFunc("GET "+Prefix, toInbox)
	c.pages.HandleFunc("GET "+Prefix+"/{$}", toInbox)
	c.pages.HandleFunc("GET "+Prefix+"/inbox", c.inbox)
	c.pages.HandleFunc("GET "+Prefix+"/requests/{id}", c.request)
	c.pages.HandleFunc("POST "+Prefix+"/requests/{id}/approve", c.decide("approve"))
	c.pages.HandleFunc("POST "+Prefix+"/requests/{id}/decline", c.decide("decline"))
	c.pages.HandleFunc("GET "+Prefix+"/operations", c.operations)
	c.pages.HandleFunc("GET "+Prefix+"/spend", c.spend)
	c.pages.HandleFunc("GET "+Prefix+"/budgets", c.budgets)
	c.pages.HandleFunc("POST "+Prefix+"/budgets", c.createBudget)
	c.pages.HandleFunc("GET "+Prefix+"/budgets/{id}", c.budget)
	c.pages.HandleFunc("POST "+Prefix+"/budgets/{id}/close", c.closeBudget)
	c.pages.HandleFunc("GET "+Prefix+"/operations/{id}", c.operation)
	c.pages.HandleFunc("POST "+Prefix+"/operations/{id}/resolve", c.resolve)
	c.pages.HandleFunc("GET "+Prefix+"/operations/{id}/receipt", c.receiptPage)
	c.pages.HandleFunc("GET "+Prefix+"/operations/{id}/receipt.dsse", c.receiptEnvelope)
	c.pages.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, nil, http.StatusNotFound, "there is no console page at "+r.URL.Path+"; start from the inbox")
	})
}

// inboxData is the inbox: the tenant's pending approval requests.
type inboxData struct {
	Requests []inboxRequest
}

type inboxRequest struct {
	api.ApprovalRequestView
	// ArgumentsText is the arguments, indented, as the page shows them.
	ArgumentsText string
}

func (c *Console) inbox(w http.ResponseWriter, r *http.Request) {
	c.inboxWith(w, r, http.StatusOK, "")
}

// inboxWith renders the inbox with status and an error to show, for a
// decision that was refused.
func (c *Console) inboxWith(w http.ResponseWriter, r *http.Request, status int, msg string) {
	v := viewerFrom(r.Context())
	list, err := c.store.ApprovalRequestList(r.Context(), &ledger.ApprovalRequestListParams{Tenant: v.tenant, Statuses: []ledger.ApprovalRequestStatus{ledger.RequestPending}})
	if err != nil {
		c.fail(w, r, err, http.StatusInternalServerError, "could not list the approval requests; the gateway log has the details, try again shortly")
		return
	}
	now := c.clock()
	var d inboxData
	for _, q := range list {
		view := api.ViewApprovalRequest(q, now)
		// Past its expiry a request waits for no one, though the sweep
		// has not yet recorded it.
		if view.Status != string(ledger.RequestPending) {
			continue
		}
		var args bytes.Buffer
		if json.Indent(&args, view.Arguments, "", "  ") != nil {
			args.Reset()
			args.Write(view.Arguments)
		}
		d.Requests = append(d.Requests, inboxRequest{ApprovalRequestView: view, ArgumentsText: args.String()})
	}
	c.render(w, r, "inbox", status, &page{Title: "Inbox", Error: msg, Data: d})
}

// decide approves or declines through the REST API's handler, so that the
// console's decisions follow exactly its rules, events and errors.
func (c *Console) decide(verb string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if err := r.ParseForm(); err != nil {
			c.inboxWith(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error())
			return
		}
		if err := checkFormTarget(r.PostForm, formApprovalRequest, id); err != nil {
			c.inboxWith(w, r, http.StatusBadRequest, err.Error())
			return
		}
		body := map[string]any{"note": r.PostFormValue("note")}
		if verb == "approve" {
			for _, f := range []string{"max_total_cost", "currency", "retry_policy", "expires_in"} {
				if v := strings.TrimSpace(r.PostFormValue(f)); v != "" {
					body[f] = v
				}
			}
			if raw := strings.TrimSpace(r.PostFormValue("max_remote_jobs")); raw != "" {
				n, err := strconv.Atoi(raw)
				if err != nil || n <= 0 {
					c.inboxWith(w, r, http.StatusBadRequest, fmt.Sprintf("remote-job limit %q is not a positive whole number", raw))
					return
				}
				body["max_remote_jobs"] = n
			}
		}
		b, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, "/v1/approval-requests/"+url.PathEscape(id)+"/"+verb, bytes.NewReader(b))
		if err != nil {
			c.fail(w, r, err, http.StatusBadRequest, fmt.Sprintf("approval request %q is not a request ID", id))
			return
		}
		req.Header.Set("Content-Type", "application/json")
		var out buffer
		c.api.ServeHTTP(&out, req)
		if out.status != http.StatusOK {
			var e struct {
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			msg := out.body.String()
			if json.Unmarshal(out.body.Bytes(), &e) == nil && e.Error.Message != "" {
				msg = e.Error.Message
			}
			c.inboxWith(w, r, out.status, fmt.Sprintf("could not %s approval request %s: %s", verb, id, msg))
			return
		}
		var decided api.ApprovalRequestDecided
		if err := json.Unmarshal(out.body.Bytes(), &decided); err != nil {
			c.fail(w, r, err, http.StatusInternalServerError, "the decision was recorded but its answer could not be read; see the inbox and the operation")
			return
		}
		if verb == "decline" {
			http.Redirect(w, r, Prefix+"/inbox", http.StatusSeeOther)
			return
		}
		http.Redirect(w, r, operationPath(decided.ApprovalRequest.OperationID, ""), http.StatusSeeOther)
	}
}

// operationData is one operation's page: its receipt, which holds the
// lineage, remote jobs, charges and next actions, and which version of it
// is issued, linking to the receipt's own page.
type operationData struct {
	Receipt *receipt.Receipt
	// Issued is the latest issued version's issue line; nil while the
	// receipt is provisional.
	Issued *receipt.IssueLine
	// Versions is how many versions were issued.
	Versions int
	Ended    bool
	// Review says the operation waits for a human's resolution, and why.
	Review       bool
	ReviewReason string
	// OpenDuplicates are the duplicate remote jobs no one has accepted or
	// cancelled yet.
	OpenDuplicates []string
}

func (c *Console) operation(w http.ResponseWriter, r *http.Request) {
	op, ok := c.findOperation(w, r)
	if !ok {
		return
	}
	c.operationPage(w, r, op, http.StatusOK, "")
}

// operationPage renders op's page with status and an error to show, for a
// resolution that was refused.
func (c *Console) operationPage(w http.ResponseWriter, r *http.Request, op *ledger.Operation, status int, msg string) {
	in, err := receipt.Load(r.Context(), c.store, op, &receipt.LoadOptions{Now: c.clock()})
	if err != nil {
		c.fail(w, r, err, http.StatusInternalServerError, "could not load the operation's receipt; the gateway log has the details, try again shortly")
		return
	}
	// The page's figures and forms follow the ledger as it stands; the
	// receipt it links to is the one issued, or a provisional one.
	rc := receipt.Build(in)
	rd, err := issue.Read(r.Context(), c.store, op, &receipt.LoadOptions{Now: c.clock()})
	if err != nil {
		c.fail(w, r, err, http.StatusInternalServerError, "could not load the operation's receipt; the gateway log has the details, try again shortly")
		return
	}
	d := operationData{Receipt: rc, Issued: rd.Receipt.Issue, Versions: len(rd.Versions), Ended: op.State.Terminal(), Review: op.State == ledger.StateReview,
		ReviewReason: op.ReviewReason}
	for _, j := range rc.RemoteJobs {
		if j.Duplicate && j.DuplicateResolved == "open" {
			d.OpenDuplicates = append(d.OpenDuplicates, j.RemoteJobID)
		}
	}
	p := &page{Title: "Operation " + visibleText(op.OperationID), Error: msg, Data: d}
	// A page with a form to fill in does not reload under the approver.
	if !d.Ended && !d.Review && len(d.OpenDuplicates) == 0 {
		p.Refresh = refreshSeconds
	}
	c.render(w, r, "operation", status, p)
}

// operationsData is the list of operations and the filters it was
// chosen by.
type operationsData struct {
	Filter     operationsFilter
	States     []ledger.State
	Operations []operationRow
}

// operationsFilter is the list's query: state, tool (upstream.tool, or a
// part of it), only those needing review, only those with open next
// actions.
type operationsFilter struct {
	State  string
	Tool   string
	Review bool
	Open   bool
}

type operationRow struct {
	*ledger.Operation
	// NextActions is how many next actions its receipt has open; only
	// counted when the filter asks for open next actions.
	NextActions int
}

// listStates are the states the filter offers, in the order of an
// operation's life.
func listStates() []ledger.State {
	return []ledger.State{ledger.StateAwaitingApproval, ledger.StateAccepted, ledger.StateSending, ledger.StateRunning,
		ledger.StateInputRequired, ledger.StateReview, ledger.StateCompleted, ledger.StateFailed, ledger.StateCancelled}
}

// operationsLimit is how many of the newest operations the list shows.
const operationsLimit = 100

func (c *Console) operations(w http.ResponseWriter, r *http.Request) {
	v := viewerFrom(r.Context())
	q := r.URL.Query()
	f := operationsFilter{State: q.Get("state"), Tool: strings.TrimSpace(q.Get("tool")), Review: q.Get("review") != "", Open: q.Get("open") != ""}
	p := &ledger.OperationListParams{Tenant: v.tenant, Limit: operationsLimit}
	if f.State != "" {
		st := ledger.State(f.State)
		if !slices.Contains(listStates(), st) {
			c.fail(w, r, nil, http.StatusBadRequest, fmt.Sprintf("state %q is not an operation state", f.State))
			return
		}
		p.States = []ledger.State{st}
	}
	if f.Review {
		p.States = []ledger.State{ledger.StateReview}
	}
	list, err := c.store.OperationList(r.Context(), p)
	if err != nil {
		c.fail(w, r, err, http.StatusInternalServerError, "could not list the operations; the gateway log has the details, try again shortly")
		return
	}
	d := operationsData{Filter: f, States: listStates()}
	for _, op := range list {
		if f.Review && op.State != ledger.StateReview {
			continue
		}
		if f.Tool != "" && !strings.Contains(op.Upstream+"."+op.Tool, f.Tool) {
			continue
		}
		row := operationRow{Operation: op}
		if f.Open {
			in, err := receipt.Load(r.Context(), c.store, op, &receipt.LoadOptions{Now: c.clock()})
			if err != nil {
				c.fail(w, r, err, http.StatusInternalServerError, "could not load an operation's receipt; the gateway log has the details, try again shortly")
				return
			}
			if row.NextActions = len(receipt.Build(in).NextActions); row.NextActions == 0 {
				continue
			}
		}
		d.Operations = append(d.Operations, row)
	}
	c.render(w, r, "operations", http.StatusOK, &page{Title: "Operations", Data: d})
}

// findOperation finds the viewer's operation named by the path's {id}, an
// operation ID or a task ID, or answers that there is none.
func (c *Console) findOperation(w http.ResponseWriter, r *http.Request) (*ledger.Operation, bool) {
	v := viewerFrom(r.Context())
	id := r.PathValue("id")
	op, err := c.store.OperationGet(r.Context(), &ledger.OperationGetParams{Tenant: v.tenant, OperationID: id})
	if errors.Is(err, ledger.ErrNotFound) {
		op, err = c.store.OperationGet(r.Context(), &ledger.OperationGetParams{Tenant: v.tenant, TaskID: id})
	}
	if errors.Is(err, ledger.ErrNotFound) {
		// Another tenant's operation reads exactly like a missing one.
		c.fail(w, r, nil, http.StatusNotFound, fmt.Sprintf("no operation or task %q", id))
		return nil, false
	}
	if err != nil {
		c.fail(w, r, err, http.StatusInternalServerError, "could not load the operation; the gateway log has the details, try again shortly")
		return nil, false
	}
	return op, true
}
