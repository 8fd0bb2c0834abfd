package mcpserver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskwire"
)

// planTable is the plan of a consequential call for every combination of
// the client (its protocol and whether it takes a task), the elicitation
// it declared, the tool's approval policy and the answer the call carries.
// Left of the bar: the inputs; right: channel (the question channel),
// acceptance (what the ledger requires, and what a call without approval
// leaves behind), answer (what becomes of an approval answer), form (how
// an approval form is asked after an approval_required denial), url (how
// the user is sent to the approver), answers (the task whose question the
// call answers) and reply. The call is priced at 18.00 USD, one job.
//
// Clients: plain-2025 and tasks-2025 are 2025-11-25 sessions without and
// with a task, plain-2026 and tasks-2026 2026-07-28 requests without and
// with the Tasks extension. Policies: none (no approval), request
// (approve_by: [request]), form (approve_by: [elicitation], form cap
// 20.00), both (approve_by: [request, elicitation], form cap 20.00),
// both>cap (form cap 10.00), both/cap0 (form cap 0, the default). Answers:
// approval answers the approval question named in requestState; stray
// names none; answers replies to the gateway's question of task T1.
//
// url and form+url plan alike: a client that declares only URL mode is
// reported by taskwire as declaring elicitation, and its URL mode wins.
const planTable = `
# client   caps     policy    answer   | channel      acceptance       answer                  form    url              answers reply
plain-2025 none     none      none     | none         none             none                    none    none             -  await
plain-2025 none     none      approval | none         none             none                    none    none             -  await
plain-2025 none     none      stray    | none         none             none                    none    none             -  await
plain-2025 none     none      answers  | none         none             none                    none    none             -  await
plain-2025 none     request   none     | none         required,record  none                    none    none             -  await
plain-2025 none     request   approval | none         required,record  ignore:no-form-approval none    none             -  await
plain-2025 none     request   stray    | none         required,record  ignore:no-form-approval none    none             -  await
plain-2025 none     request   answers  | none         required,record  none                    none    none             -  await
plain-2025 none     form      none     | none         required,none    none                    none    none             -  await
plain-2025 none     form      approval | none         required,none    ignore:protocol         none    none             -  await
plain-2025 none     form      stray    | none         required,none    ignore:protocol         none    none             -  await
plain-2025 none     form      answers  | none         required,none    none                    none    none             -  await
plain-2025 none     both      none     | none         required,record  none                    none    none             -  await
plain-2025 none     both      approval | none         required,record  ignore:protocol         none    none             -  await
plain-2025 none     both      stray    | none         required,record  ignore:protocol         none    none             -  await
plain-2025 none     both      answers  | none         required,record  none                    none    none             -  await
plain-2025 none     both>cap  none     | none         required,record  none                    none    none             -  await
plain-2025 none     both>cap  approval | none         required,record  ignore:over-form-cap    none    none             -  await
plain-2025 none     both>cap  stray    | none         required,record  ignore:over-form-cap    none    none             -  await
plain-2025 none     both>cap  answers  | none         required,record  none                    none    none             -  await
plain-2025 none     both/cap0 none     | none         required,record  none                    none    none             -  await
plain-2025 none     both/cap0 approval | none         required,record  ignore:no-form-approval none    none             -  await
plain-2025 none     both/cap0 stray    | none         required,record  ignore:no-form-approval none    none             -  await
plain-2025 none     both/cap0 answers  | none         required,record  none                    none    none             -  await

plain-2025 form     none      none     | none         none             none                    none    none             -  await
plain-2025 form     none      approval | none         none             none                    none    none             -  await
plain-2025 form     none      stray    | none         none             none                    none    none             -  await
plain-2025 form     none      answers  | none         none             none                    none    none             -  await
plain-2025 form     request   none     | none         required,record  none                    none    none             -  await
plain-2025 form     request   approval | none         required,record  ignore:no-form-approval none    none             -  await
plain-2025 form     request   stray    | none         required,record  ignore:no-form-approval none    none             -  await
plain-2025 form     request   answers  | none         required,record  none                    none    none             -  await
plain-2025 form     form      none     | none         required,none    none                    session none             -  await
plain-2025 form     form      approval | none         required,none    ignore:protocol         session none             -  await
plain-2025 form     form      stray    | none         required,none    ignore:protocol         session none             -  await
plain-2025 form     form      answers  | none         required,none    none                    session none             -  await
plain-2025 form     both      none     | none         required,none    none                    session none             -  await
plain-2025 form     both      approval | none         required,none    ignore:protocol         session none             -  await
plain-2025 form     both      stray    | none         required,none    ignore:protocol         session none             -  await
plain-2025 form     both      answers  | none         required,none    none                    session none             -  await
plain-2025 form     both>cap  none     | none         required,record  none                    none    none             -  await
plain-2025 form     both>cap  approval | none         required,record  ignore:over-form-cap    none    none             -  await
plain-2025 form     both>cap  stray    | none         required,record  ignore:over-form-cap    none    none             -  await
plain-2025 form     both>cap  answers  | none         required,record  none                    none    none             -  await
plain-2025 form     both/cap0 none     | none         required,record  none                    none    none             -  await
plain-2025 form     both/cap0 approval | none         required,record  ignore:no-form-approval none    none             -  await
plain-2025 form     both/cap0 stray    | none         required,record  ignore:no-form-approval none    none             -  await
plain-2025 form     both/cap0 answers  | none         required,record  none                    none    none             -  await

plain-2025 url      none      none     | none         none             none                    none    none             -  await
plain-2025 url      none      approval | none         none             none                    none    none             -  await
plain-2025 url      none      stray    | none         none             none                    none    none             -  await
plain-2025 url      none      answers  | none         none             none                    none    none             -  await
plain-2025 url      request   none     | none         required,record  none                    none    none             -  await
plain-2025 url      request   approval | none         required,record  ignore:no-form-approval none    none             -  await
plain-2025 url      request   stray    | none         required,record  ignore:no-form-approval none    none             -  await
plain-2025 url      request   answers  | none         required,record  none                    none    none             -  await
plain-2025 url      form      none     | none         required,wait    none                    session session+announce -  await
plain-2025 url      form      approval | none         required,wait    url-only                session session+announce -  await
plain-2025 url      form      stray    | none         required,wait    url-only                session session+announce -  await
plain-2025 url      form      answers  | none         required,wait    none                    session session+announce -  await
plain-2025 url      both      none     | none         required,wait    none                    session session+announce -  await
plain-2025 url      both      approval | none         required,wait    url-only                session session+announce -  await
plain-2025 url      both      stray    | none         required,wait    url-only                session session+announce -  await
plain-2025 url      both      answers  | none         required,wait    none                    session session+announce -  await
plain-2025 url      both>cap  none     | none         required,wait    none                    none    session+announce -  await
plain-2025 url      both>cap  approval | none         required,wait    url-only                none    session+announce -  await
plain-2025 url      both>cap  stray    | none         required,wait    url-only                none    session+announce -  await
plain-2025 url      both>cap  answers  | none         required,wait    none                    none    session+announce -  await
plain-2025 url      both/cap0 none     | none         required,wait    none                    none    session+announce -  await
plain-2025 url      both/cap0 approval | none         required,wait    url-only                none    session+announce -  await
plain-2025 url      both/cap0 stray    | none         required,wait    url-only                none    session+announce -  await
plain-2025 url      both/cap0 answers  | none         required,wait    none                    none    session+announce -  await

plain-2025 form+url none      none     | none         none             none                    none    none             -  await
plain-2025 form+url none      approval | none         none             none                    none    none             -  await
plain-2025 form+url none      stray    | none         none             none                    none    none             -  await
plain-2025 form+url none      answers  | none         none             none                    none    none             -  await
plain-2025 form+url request   none     | none         required,record  none                    none    none             -  await
plain-2025 form+url request   approval | none         required,record  ignore:no-form-approval none    none             -  await
plain-2025 form+url request   stray    | none         required,record  ignore:no-form-approval none    none             -  await
plain-2025 form+url request   answers  | none         required,record  none                    none    none             -  await
plain-2025 form+url form      none     | none         required,wait    none                    session session+announce -  await
plain-2025 form+url form      approval | none         required,wait    url-only                session session+announce -  await
plain-2025 form+url form      stray    | none         required,wait    url-only                session session+announce -  await
plain-2025 form+url form      answers  | none         required,wait    none                    session session+announce -  await
plain-2025 form+url both      none     | none         required,wait    none                    session session+announce -  await
plain-2025 form+url both      approval | none         required,wait    url-only                session session+announce -  await
plain-2025 form+url both      stray    | none         required,wait    url-only                session session+announce -  await
plain-2025 form+url both      answers  | none         required,wait    none                    session session+announce -  await
plain-2025 form+url both>cap  none     | none         required,wait    none                    none    session+announce -  await
plain-2025 form+url both>cap  approval | none         required,wait    url-only                none    session+announce -  await
plain-2025 form+url both>cap  stray    | none         required,wait    url-only                none    session+announce -  await
plain-2025 form+url both>cap  answers  | none         required,wait    none                    none    session+announce -  await
plain-2025 form+url both/cap0 none     | none         required,wait    none                    none    session+announce -  await
plain-2025 form+url both/cap0 approval | none         required,wait    url-only                none    session+announce -  await
plain-2025 form+url both/cap0 stray    | none         required,wait    url-only                none    session+announce -  await
plain-2025 form+url both/cap0 answers  | none         required,wait    none                    none    session+announce -  await

tasks-2025 none     none      none     | none         none             none                    none    none             -  task
tasks-2025 none     none      approval | none         none             none                    none    none             -  task
tasks-2025 none     none      stray    | none         none             none                    none    none             -  task
tasks-2025 none     none      answers  | none         none             none                    none    none             -  task
tasks-2025 none     request   none     | none         required,wait    none                    none    none             -  task
tasks-2025 none     request   approval | none         required,wait    ignore:no-form-approval none    none             -  task
tasks-2025 none     request   stray    | none         required,wait    ignore:no-form-approval none    none             -  task
tasks-2025 none     request   answers  | none         required,wait    none                    none    none             -  task
tasks-2025 none     form      none     | none         required,none    none                    none    none             -  task
tasks-2025 none     form      approval | none         required,none    ignore:protocol         none    none             -  task
tasks-2025 none     form      stray    | none         required,none    ignore:protocol         none    none             -  task
tasks-2025 none     form      answers  | none         required,none    none                    none    none             -  task
tasks-2025 none     both      none     | none         required,wait    none                    none    none             -  task
tasks-2025 none     both      approval | none         required,wait    ignore:protocol         none    none             -  task
tasks-2025 none     both      stray    | none         required,wait    ignore:protocol         none    none             -  task
tasks-2025 none     both      answers  | none         required,wait    none                    none    none             -  task
tasks-2025 none     both>cap  none     | none         required,wait    none                    none    none             -  task
tasks-2025 none     both>cap  approval | none         required,wait    ignore:over-form-cap    none    none             -  task
tasks-2025 none     both>cap  stray    | none         required,wait    ignore:over-form-cap    none    none             -  task
tasks-2025 none     both>cap  answers  | none         required,wait    none                    none    none             -  task
tasks-2025 none     both/cap0 none     | none         required,wait    none                    none    none             -  task
tasks-2025 none     both/cap0 approval | none         required,wait    ignore:no-form-approval none    none             -  task
tasks-2025 none     both/cap0 stray    | none         required,wait    ignore:no-form-approval none    none             -  task
tasks-2025 none     both/cap0 answers  | none         required,wait    none                    none    none             -  task

tasks-2025 form     none      none     | tasks_result none             none                    none    none             -  task
tasks-2025 form     none      approval | tasks_result none             none                    none    none             -  task
tasks-2025 form     none      stray    | tasks_result none             none                    none    none             -  task
tasks-2025 form     none      answers  | tasks_result none             none                    none    none             -  task
tasks-2025 form     request   none     | tasks_result required,wait    none                    none    none             -  task
tasks-2025 form     request   approval | tasks_result required,wait    ignore:no-form-approval none    none             -  task
tasks-2025 form     request   stray    | tasks_result required,wait    ignore:no-form-approval none    none             -  task
tasks-2025 form     request   answers  | tasks_result required,wait    none                    none    none             -  task
tasks-2025 form     form      none     | tasks_result required,none    none                    session none             -  task
tasks-2025 form     form      approval | tasks_result required,none    ignore:protocol         session none             -  task
tasks-2025 form     form      stray    | tasks_result required,none    ignore:protocol         session none             -  task
tasks-2025 form     form      answers  | tasks_result required,none    none                    session none             -  task
tasks-2025 form     both      none     | tasks_result required,none    none                    session none             -  task
tasks-2025 form     both      approval | tasks_result required,none    ignore:protocol         session none             -  task
tasks-2025 form     both      stray    | tasks_result required,none    ignore:protocol         session none             -  task
tasks-2025 form     both      answers  | tasks_result required,none    none                    session none             -  task
tasks-2025 form     both>cap  none     | tasks_result required,wait    none                    none    none             -  task
tasks-2025 form     both>cap  approval | tasks_result required,wait    ignore:over-form-cap    none    none             -  task
tasks-2025 form     both>cap  stray    | tasks_result required,wait    ignore:over-form-cap    none    none             -  task
tasks-2025 form     both>cap  answers  | tasks_result required,wait    none                    none    none             -  task
tasks-2025 form     both/cap0 none     | tasks_result required,wait    none                    none    none             -  task
tasks-2025 form     both/cap0 approval | tasks_result required,wait    ignore:no-form-approval none    none             -  task
tasks-2025 form     both/cap0 stray    | tasks_result required,wait    ignore:no-form-approval none    none             -  task
tasks-2025 form     both/cap0 answers  | tasks_result required,wait    none                    none    none             -  task

tasks-2025 url      none      none     | tasks_result none             none                    none    none             -  task
tasks-2025 url      none      approval | tasks_result none             none                    none    none             -  task
tasks-2025 url      none      stray    | tasks_result none             none                    none    none             -  task
tasks-2025 url      none      answers  | tasks_result none             none                    none    none             -  task
tasks-2025 url      request   none     | tasks_result required,wait    none                    none    none             -  task
tasks-2025 url      request   approval | tasks_result required,wait    ignore:no-form-approval none    none             -  task
tasks-2025 url      request   stray    | tasks_result required,wait    ignore:no-form-approval none    none             -  task
tasks-2025 url      request   answers  | tasks_result required,wait    none                    none    none             -  task
tasks-2025 url      form      none     | tasks_result required,wait    none                    session session+announce -  task
tasks-2025 url      form      approval | tasks_result required,wait    url-only                session session+announce -  task
tasks-2025 url      form      stray    | tasks_result required,wait    url-only                session session+announce -  task
tasks-2025 url      form      answers  | tasks_result required,wait    none                    session session+announce -  task
tasks-2025 url      both      none     | tasks_result required,wait    none                    session session+announce -  task
tasks-2025 url      both      approval | tasks_result required,wait    url-only                session session+announce -  task
tasks-2025 url      both      stray    | tasks_result required,wait    url-only                session session+announce -  task
tasks-2025 url      both      answers  | tasks_result required,wait    none                    session session+announce -  task
tasks-2025 url      both>cap  none     | tasks_result required,wait    none                    none    session+announce -  task
tasks-2025 url      both>cap  approval | tasks_result required,wait    url-only                none    session+announce -  task
tasks-2025 url      both>cap  stray    | tasks_result required,wait    url-only                none    session+announce -  task
tasks-2025 url      both>cap  answers  | tasks_result required,wait    none                    none    session+announce -  task
tasks-2025 url      both/cap0 none     | tasks_result required,wait    none                    none    session+announce -  task
tasks-2025 url      both/cap0 approval | tasks_result required,wait    url-only                none    session+announce -  task
tasks-2025 url      both/cap0 stray    | tasks_result required,wait    url-only                none    session+announce -  task
tasks-2025 url      both/cap0 answers  | tasks_result required,wait    none                    none    session+announce -  task

tasks-2025 form+url none      none     | tasks_result none             none                    none    none             -  task
tasks-2025 form+url none      approval | tasks_result none             none                    none    none             -  task
tasks-2025 form+url none      stray    | tasks_result none             none                    none    none             -  task
tasks-2025 form+url none      answers  | tasks_result none             none                    none    none             -  task
tasks-2025 form+url request   none     | tasks_result required,wait    none                    none    none             -  task
tasks-2025 form+url request   approval | tasks_result required,wait    ignore:no-form-approval none    none             -  task
tasks-2025 form+url request   stray    | tasks_result required,wait    ignore:no-form-approval none    none             -  task
tasks-2025 form+url request   answers  | tasks_result required,wait    none                    none    none             -  task
tasks-2025 form+url form      none     | tasks_result required,wait    none                    session session+announce -  task
tasks-2025 form+url form      approval | tasks_result required,wait    url-only                session session+announce -  task
tasks-2025 form+url form      stray    | tasks_result required,wait    url-only                session session+announce -  task
tasks-2025 form+url form      answers  | tasks_result required,wait    none                    session session+announce -  task
tasks-2025 form+url both      none     | tasks_result required,wait    none                    session session+announce -  task
tasks-2025 form+url both      approval | tasks_result required,wait    url-only                session session+announce -  task
tasks-2025 form+url both      stray    | tasks_result required,wait    url-only                session session+announce -  task
tasks-2025 form+url both      answers  | tasks_result required,wait    none                    session session+announce -  task
tasks-2025 form+url both>cap  none     | tasks_result required,wait    none                    none    session+announce -  task
tasks-2025 form+url both>cap  approval | tasks_result required,wait    url-only                none    session+announce -  task
tasks-2025 form+url both>cap  stray    | tasks_result required,wait    url-only                none    session+announce -  task
tasks-2025 form+url both>cap  answers  | tasks_result required,wait    none                    none    session+announce -  task
tasks-2025 form+url both/cap0 none     | tasks_result required,wait    none                    none    session+announce -  task
tasks-2025 form+url both/cap0 approval | tasks_result required,wait    url-only                none    session+announce -  task
tasks-2025 form+url both/cap0 stray    | tasks_result required,wait    url-only                none    session+announce -  task
tasks-2025 form+url both/cap0 answers  | tasks_result required,wait    none                    none    session+announce -  task

plain-2026 none     none      none     | none         none             none                    none    none             -  await
plain-2026 none     none      approval | none         none             none                    none    none             -  await
plain-2026 none     none      stray    | none         none             none                    none    none             -  await
plain-2026 none     none      answers  | none         none             none                    none    none             T1 await
plain-2026 none     request   none     | none         required,record  none                    none    none             -  await
plain-2026 none     request   approval | none         required,record  ignore:no-form-approval none    none             -  await
plain-2026 none     request   stray    | none         required,record  ignore:no-form-approval none    none             -  await
plain-2026 none     request   answers  | none         required,record  none                    none    none             T1 await
plain-2026 none     form      none     | none         required,none    none                    none    none             -  await
plain-2026 none     form      approval | none         required,none    ignore:undeclared       none    none             -  await
plain-2026 none     form      stray    | none         required,none    ignore:undeclared       none    none             -  await
plain-2026 none     form      answers  | none         required,none    none                    none    none             T1 await
plain-2026 none     both      none     | none         required,record  none                    none    none             -  await
plain-2026 none     both      approval | none         required,record  ignore:undeclared       none    none             -  await
plain-2026 none     both      stray    | none         required,record  ignore:undeclared       none    none             -  await
plain-2026 none     both      answers  | none         required,record  none                    none    none             T1 await
plain-2026 none     both>cap  none     | none         required,record  none                    none    none             -  await
plain-2026 none     both>cap  approval | none         required,record  ignore:over-form-cap    none    none             -  await
plain-2026 none     both>cap  stray    | none         required,record  ignore:over-form-cap    none    none             -  await
plain-2026 none     both>cap  answers  | none         required,record  none                    none    none             T1 await
plain-2026 none     both/cap0 none     | none         required,record  none                    none    none             -  await
plain-2026 none     both/cap0 approval | none         required,record  ignore:no-form-approval none    none             -  await
plain-2026 none     both/cap0 stray    | none         required,record  ignore:no-form-approval none    none             -  await
plain-2026 none     both/cap0 answers  | none         required,record  none                    none    none             T1 await

plain-2026 form     none      none     | call_result  none             none                    none    none             -  await-or-ask
plain-2026 form     none      approval | call_result  none             none                    none    none             -  await-or-ask
plain-2026 form     none      stray    | call_result  none             none                    none    none             -  await-or-ask
plain-2026 form     none      answers  | call_result  none             none                    none    none             T1 await-or-ask
plain-2026 form     request   none     | call_result  required,record  none                    none    none             -  await-or-ask
plain-2026 form     request   approval | call_result  required,record  ignore:no-form-approval none    none             -  await-or-ask
plain-2026 form     request   stray    | call_result  required,record  ignore:no-form-approval none    none             -  await-or-ask
plain-2026 form     request   answers  | call_result  required,record  none                    none    none             T1 await-or-ask
plain-2026 form     form      none     | call_result  required,none    none                    result  none             -  await-or-ask
plain-2026 form     form      approval | call_result  required,none    take:N1                 result  none             -  await-or-ask
plain-2026 form     form      stray    | call_result  required,none    ignore:no-question      result  none             -  await-or-ask
plain-2026 form     form      answers  | call_result  required,none    none                    result  none             T1 await-or-ask
plain-2026 form     both      none     | call_result  required,none    none                    result  none             -  await-or-ask
plain-2026 form     both      approval | call_result  required,none    take:N1                 result  none             -  await-or-ask
plain-2026 form     both      stray    | call_result  required,none    ignore:no-question      result  none             -  await-or-ask
plain-2026 form     both      answers  | call_result  required,none    none                    result  none             T1 await-or-ask
plain-2026 form     both>cap  none     | call_result  required,record  none                    none    none             -  await-or-ask
plain-2026 form     both>cap  approval | call_result  required,record  ignore:over-form-cap    none    none             -  await-or-ask
plain-2026 form     both>cap  stray    | call_result  required,record  ignore:over-form-cap    none    none             -  await-or-ask
plain-2026 form     both>cap  answers  | call_result  required,record  none                    none    none             T1 await-or-ask
plain-2026 form     both/cap0 none     | call_result  required,record  none                    none    none             -  await-or-ask
plain-2026 form     both/cap0 approval | call_result  required,record  ignore:no-form-approval none    none             -  await-or-ask
plain-2026 form     both/cap0 stray    | call_result  required,record  ignore:no-form-approval none    none             -  await-or-ask
plain-2026 form     both/cap0 answers  | call_result  required,record  none                    none    none             T1 await-or-ask

plain-2026 url      none      none     | call_result  none             none                    none    none             -  await-or-ask
plain-2026 url      none      approval | call_result  none             none                    none    none             -  await-or-ask
plain-2026 url      none      stray    | call_result  none             none                    none    none             -  await-or-ask
plain-2026 url      none      answers  | call_result  none             none                    none    none             T1 await-or-ask
plain-2026 url      request   none     | call_result  required,record  none                    none    none             -  await-or-ask
plain-2026 url      request   approval | call_result  required,record  ignore:no-form-approval none    none             -  await-or-ask
plain-2026 url      request   stray    | call_result  required,record  ignore:no-form-approval none    none             -  await-or-ask
plain-2026 url      request   answers  | call_result  required,record  none                    none    none             T1 await-or-ask
plain-2026 url      form      none     | call_result  required,wait    none                    result  result           -  await-or-ask
plain-2026 url      form      approval | call_result  required,wait    url-only                result  none             -  await-or-ask
plain-2026 url      form      stray    | call_result  required,wait    url-only                result  none             -  await-or-ask
plain-2026 url      form      answers  | call_result  required,wait    none                    result  result           T1 await-or-ask
plain-2026 url      both      none     | call_result  required,wait    none                    result  result           -  await-or-ask
plain-2026 url      both      approval | call_result  required,wait    url-only                result  none             -  await-or-ask
plain-2026 url      both      stray    | call_result  required,wait    url-only                result  none             -  await-or-ask
plain-2026 url      both      answers  | call_result  required,wait    none                    result  result           T1 await-or-ask
plain-2026 url      both>cap  none     | call_result  required,wait    none                    none    result           -  await-or-ask
plain-2026 url      both>cap  approval | call_result  required,wait    url-only                none    none             -  await-or-ask
plain-2026 url      both>cap  stray    | call_result  required,wait    url-only                none    none             -  await-or-ask
plain-2026 url      both>cap  answers  | call_result  required,wait    none                    none    result           T1 await-or-ask
plain-2026 url      both/cap0 none     | call_result  required,wait    none                    none    result           -  await-or-ask
plain-2026 url      both/cap0 approval | call_result  required,wait    url-only                none    none             -  await-or-ask
plain-2026 url      both/cap0 stray    | call_result  required,wait    url-only                none    none             -  await-or-ask
plain-2026 url      both/cap0 answers  | call_result  required,wait    none                    none    result           T1 await-or-ask

plain-2026 form+url none      none     | call_result  none             none                    none    none             -  await-or-ask
plain-2026 form+url none      approval | call_result  none             none                    none    none             -  await-or-ask
plain-2026 form+url none      stray    | call_result  none             none                    none    none             -  await-or-ask
plain-2026 form+url none      answers  | call_result  none             none                    none    none             T1 await-or-ask
plain-2026 form+url request   none     | call_result  required,record  none                    none    none             -  await-or-ask
plain-2026 form+url request   approval | call_result  required,record  ignore:no-form-approval none    none             -  await-or-ask
plain-2026 form+url request   stray    | call_result  required,record  ignore:no-form-approval none    none             -  await-or-ask
plain-2026 form+url request   answers  | call_result  required,record  none                    none    none             T1 await-or-ask
plain-2026 form+url form      none     | call_result  required,wait    none                    result  result           -  await-or-ask
plain-2026 form+url form      approval | call_result  required,wait    url-only                result  none             -  await-or-ask
plain-2026 form+url form      stray    | call_result  required,wait    url-only                result  none             -  await-or-ask
plain-2026 form+url form      answers  | call_result  required,wait    none                    result  result           T1 await-or-ask
plain-2026 form+url both      none     | call_result  required,wait    none                    result  result           -  await-or-ask
plain-2026 form+url both      approval | call_result  required,wait    url-only                result  none             -  await-or-ask
plain-2026 form+url both      stray    | call_result  required,wait    url-only                result  none             -  await-or-ask
plain-2026 form+url both      answers  | call_result  required,wait    none                    result  result           T1 await-or-ask
plain-2026 form+url both>cap  none     | call_result  required,wait    none                    none    result           -  await-or-ask
plain-2026 form+url both>cap  approval | call_result  required,wait    url-only                none    none             -  await-or-ask
plain-2026 form+url both>cap  stray    | call_result  required,wait    url-only                none    none             -  await-or-ask
plain-2026 form+url both>cap  answers  | call_result  required,wait    none                    none    result           T1 await-or-ask
plain-2026 form+url both/cap0 none     | call_result  required,wait    none                    none    result           -  await-or-ask
plain-2026 form+url both/cap0 approval | call_result  required,wait    url-only                none    none             -  await-or-ask
plain-2026 form+url both/cap0 stray    | call_result  required,wait    url-only                none    none             -  await-or-ask
plain-2026 form+url both/cap0 answers  | call_result  required,wait    none                    none    result           T1 await-or-ask

tasks-2026 none     none      none     | tasks_update none             none                    none    none             -  task
tasks-2026 none     none      approval | tasks_update none             none                    none    none             -  task
tasks-2026 none     none      stray    | tasks_update none             none                    none    none             -  task
tasks-2026 none     none      answers  | tasks_update none             none                    none    none             T1 task
tasks-2026 none     request   none     | tasks_update required,wait    none                    none    none             -  task
tasks-2026 none     request   approval | tasks_update required,wait    ignore:no-form-approval none    none             -  task
tasks-2026 none     request   stray    | tasks_update required,wait    ignore:no-form-approval none    none             -  task
tasks-2026 none     request   answers  | tasks_update required,wait    none                    none    none             T1 task
tasks-2026 none     form      none     | tasks_update required,none    none                    none    none             -  task
tasks-2026 none     form      approval | tasks_update required,none    ignore:undeclared       none    none             -  task
tasks-2026 none     form      stray    | tasks_update required,none    ignore:undeclared       none    none             -  task
tasks-2026 none     form      answers  | tasks_update required,none    none                    none    none             T1 task
tasks-2026 none     both      none     | tasks_update required,wait    none                    none    none             -  task
tasks-2026 none     both      approval | tasks_update required,wait    ignore:undeclared       none    none             -  task
tasks-2026 none     both      stray    | tasks_update required,wait    ignore:undeclared       none    none             -  task
tasks-2026 none     both      answers  | tasks_update required,wait    none                    none    none             T1 task
tasks-2026 none     both>cap  none     | tasks_update required,wait    none                    none    none             -  task
tasks-2026 none     both>cap  approval | tasks_update required,wait    ignore:over-form-cap    none    none             -  task
tasks-2026 none     both>cap  stray    | tasks_update required,wait    ignore:over-form-cap    none    none             -  task
tasks-2026 none     both>cap  answers  | tasks_update required,wait    none                    none    none             T1 task
tasks-2026 none     both/cap0 none     | tasks_update required,wait    none                    none    none             -  task
tasks-2026 none     both/cap0 approval | tasks_update required,wait    ignore:no-form-approval none    none             -  task
tasks-2026 none     both/cap0 stray    | tasks_update required,wait    ignore:no-form-approval none    none             -  task
tasks-2026 none     both/cap0 answers  | tasks_update required,wait    none                    none    none             T1 task

tasks-2026 form     none      none     | tasks_update none             none                    none    none             -  task
tasks-2026 form     none      approval | tasks_update none             none                    none    none             -  task
tasks-2026 form     none      stray    | tasks_update none             none                    none    none             -  task
tasks-2026 form     none      answers  | tasks_update none             none                    none    none             T1 task
tasks-2026 form     request   none     | tasks_update required,wait    none                    none    none             -  task
tasks-2026 form     request   approval | tasks_update required,wait    ignore:no-form-approval none    none             -  task
tasks-2026 form     request   stray    | tasks_update required,wait    ignore:no-form-approval none    none             -  task
tasks-2026 form     request   answers  | tasks_update required,wait    none                    none    none             T1 task
tasks-2026 form     form      none     | tasks_update required,none    none                    result  none             -  task
tasks-2026 form     form      approval | tasks_update required,none    take:N1                 result  none             -  task
tasks-2026 form     form      stray    | tasks_update required,none    ignore:no-question      result  none             -  task
tasks-2026 form     form      answers  | tasks_update required,none    none                    result  none             T1 task
tasks-2026 form     both      none     | tasks_update required,none    none                    result  none             -  task
tasks-2026 form     both      approval | tasks_update required,none    take:N1                 result  none             -  task
tasks-2026 form     both      stray    | tasks_update required,none    ignore:no-question      result  none             -  task
tasks-2026 form     both      answers  | tasks_update required,none    none                    result  none             T1 task
tasks-2026 form     both>cap  none     | tasks_update required,wait    none                    none    none             -  task
tasks-2026 form     both>cap  approval | tasks_update required,wait    ignore:over-form-cap    none    none             -  task
tasks-2026 form     both>cap  stray    | tasks_update required,wait    ignore:over-form-cap    none    none             -  task
tasks-2026 form     both>cap  answers  | tasks_update required,wait    none                    none    none             T1 task
tasks-2026 form     both/cap0 none     | tasks_update required,wait    none                    none    none             -  task
tasks-2026 form     both/cap0 approval | tasks_update required,wait    ignore:no-form-approval none    none             -  task
tasks-2026 form     both/cap0 stray    | tasks_update required,wait    ignore:no-form-approval none    none             -  task
tasks-2026 form     both/cap0 answers  | tasks_update required,wait    none                    none    none             T1 task

tasks-2026 url      none      none     | tasks_update none             none                    none    none             -  task
tasks-2026 url      none      approval | tasks_update none             none                    none    none             -  task
tasks-2026 url      none      stray    | tasks_update none             none                    none    none             -  task
tasks-2026 url      none      answers  | tasks_update none             none                    none    none             T1 task
tasks-2026 url      request   none     | tasks_update required,wait    none                    none    none             -  task
tasks-2026 url      request   approval | tasks_update required,wait    ignore:no-form-approval none    none             -  task
tasks-2026 url      request   stray    | tasks_update required,wait    ignore:no-form-approval none    none             -  task
tasks-2026 url      request   answers  | tasks_update required,wait    none                    none    none             T1 task
tasks-2026 url      form      none     | tasks_update required,wait    none                    result  result           -  task
tasks-2026 url      form      approval | tasks_update required,wait    url-only                result  none             -  task
tasks-2026 url      form      stray    | tasks_update required,wait    url-only                result  none             -  task
tasks-2026 url      form      answers  | tasks_update required,wait    none                    result  result           T1 task
tasks-2026 url      both      none     | tasks_update required,wait    none                    result  result           -  task
tasks-2026 url      both      approval | tasks_update required,wait    url-only                result  none             -  task
tasks-2026 url      both      stray    | tasks_update required,wait    url-only                result  none             -  task
tasks-2026 url      both      answers  | tasks_update required,wait    none                    result  result           T1 task
tasks-2026 url      both>cap  none     | tasks_update required,wait    none                    none    result           -  task
tasks-2026 url      both>cap  approval | tasks_update required,wait    url-only                none    none             -  task
tasks-2026 url      both>cap  stray    | tasks_update required,wait    url-only                none    none             -  task
tasks-2026 url      both>cap  answers  | tasks_update required,wait    none                    none    result           T1 task
tasks-2026 url      both/cap0 none     | tasks_update required,wait    none                    none    result           -  task
tasks-2026 url      both/cap0 approval | tasks_update required,wait    url-only                none    none             -  task
tasks-2026 url      both/cap0 stray    | tasks_update required,wait    url-only                none    none             -  task
tasks-2026 url      both/cap0 answers  | tasks_update required,wait    none                    none    result           T1 task

tasks-2026 form+url none      none     | tasks_update none             none                    none    none             -  task
tasks-2026 form+url none      approval | tasks_update none             none                    none    none             -  task
tasks-2026 form+url none      stray    | tasks_update none             none                    none    none             -  task
tasks-2026 form+url none      answers  | tasks_update none             none                    none    none             T1 task
tasks-2026 form+url request   none     | tasks_update required,wait    none                    none    none             -  task
tasks-2026 form+url request   approval | tasks_update required,wait    ignore:no-form-approval none    none             -  task
tasks-2026 form+url request   stray    | tasks_update required,wait    ignore:no-form-approval none    none             -  task
tasks-2026 form+url request   answers  | tasks_update required,wait    none                    none    none             T1 task
tasks-2026 form+url form      none     | tasks_update required,wait    none                    result  result           -  task
tasks-2026 form+url form      approval | tasks_update required,wait    url-only                result  none             -  task
tasks-2026 form+url form      stray    | tasks_update required,wait    url-only                result  none             -  task
tasks-2026 form+url form      answers  | tasks_update required,wait    none                    result  result           T1 task
tasks-2026 form+url both      none     | tasks_update required,wait    none                    result  result           -  task
tasks-2026 form+url both      approval | tasks_update required,wait    url-only                result  none             -  task
tasks-2026 form+url both      stray    | tasks_update required,wait    url-only                result  none             -  task
tasks-2026 form+url both      answers  | tasks_update required,wait    none                    result  result           T1 task
tasks-2026 form+url both>cap  none     | tasks_update required,wait    none                    none    result           -  task
tasks-2026 form+url both>cap  approval | tasks_update required,wait    url-only                none    none             -  task
tasks-2026 form+url both>cap  stray    | tasks_update required,wait    url-only                none    none             -  task
tasks-2026 form+url both>cap  answers  | tasks_update required,wait    none                    none    result           T1 task
tasks-2026 form+url both/cap0 none     | tasks_update required,wait    none                    none    result           -  task
tasks-2026 form+url both/cap0 approval | tasks_update required,wait    url-only                none    none             -  task
tasks-2026 form+url both/cap0 stray    | tasks_update required,wait    url-only                none    none             -  task
tasks-2026 form+url both/cap0 answers  | tasks_update required,wait    none                    none    result           T1 task
`

// The clients, capabilities, policies and answers the table combines.
var (
	planClients  = []string{"plain-2025", "tasks-2025", "plain-2026", "tasks-2026"}
	planCaps     = []string{"none", "form", "url", "form+url"}
	planPolicies = []string{"none", "request", "form", "both", "both>cap", "both/cap0"}
	planAnswers  = []string{"none", "approval", "stray", "answers"}
)

// planEstimate is what every call of the table is priced at.
var planEstimate = policy.Route{RemoteJobs: 1, Estimate: money.MustParse("18.00", "USD")}

// planCaller is the call of client with caps, as taskwire builds its
// Caller: a 2026-07-28 request declares elicitation per request; a
// 2025-11-25 session that declared it can be asked over the session and
// told when a URL elicitation completes.
func planCaller(t *testing.T, client, caps string) *taskwire.ToolCall {
	t.Helper()
	call := &taskwire.ToolCall{Name: "suite.run"}
	c := &call.Caller
	switch client {
	case "plain-2025":
		c.Era, c.ProtocolVersion = taskwire.EraNone, "2025-11-25"
	case "tasks-2025":
		c.Era, c.ProtocolVersion = taskwire.EraLegacy, "2025-11-25"
	case "plain-2026":
		c.Era, c.ProtocolVersion = taskwire.EraNone, "2026-07-28"
	case "tasks-2026":
		c.Era, c.ProtocolVersion = taskwire.EraExtension, "2026-07-28"
	default:
		t.Fatalf("unknown client %q", client)
	}
	switch caps {
	case "none":
		return call
	case "form":
	case "url", "form+url":
		c.ElicitationURL = true
	default:
		t.Fatalf("unknown capabilities %q", caps)
	}
	c.ElicitationDeclared = true
	if c.ProtocolVersion != "2026-07-28" {
		c.Elicit = func(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			return nil, errors.New("a plan asks nothing")
		}
		c.NotifyElicitationComplete = func(context.Context, *mcp.ElicitationCompleteParams) error {
			return errors.New("a plan tells nothing")
		}
	}
	return call
}

// planPolicy is the tool's policy the table names.
func planPolicy(t *testing.T, name string) *config.Tool {
	t.Helper()
	usd := func(s string) money.Amount { return money.MustParse(s, "USD") }
	both := []ledger.ApprovalWay{ledger.ApproveByRequest, ledger.ApproveByElicitation}
	tool := &config.Tool{Approval: ledger.ApprovalRequired, ApproveBy: both, ElicitationMaxTotalCost: usd("20.00")}
	switch name {
	case "none":
		tool.Approval, tool.ElicitationMaxTotalCost = ledger.ApprovalNone, money.Zero("USD")
	case "request":
		tool.ApproveBy = []ledger.ApprovalWay{ledger.ApproveByRequest}
	case "form":
		tool.ApproveBy = []ledger.ApprovalWay{ledger.ApproveByElicitation}
	case "both":
	case "both>cap":
		tool.ElicitationMaxTotalCost = usd("10.00")
	case "both/cap0":
		tool.ElicitationMaxTotalCost = money.Zero("USD")
	default:
		t.Fatalf("unknown policy %q", name)
	}
	return tool
}

// planAnswer adds to call the answer the table names.
func planAnswer(t *testing.T, call *taskwire.ToolCall, answer string) {
	t.Helper()
	accept := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"max_total_cost": "18.00"}}
	switch answer {
	case "none":
	case "approval":
		call.InputResponses = mcp.InputResponseMap{approvalInput: accept}
		call.RequestState = approvalStatePrefix + "N1"
	case "stray":
		call.InputResponses = mcp.InputResponseMap{approvalInput: accept}
	case "answers":
		call.InputResponses = mcp.InputResponseMap{"q1": accept}
		call.RequestState = questionStatePrefix + "T1"
	default:
		t.Fatalf("unknown answer %q", answer)
	}
}

var (
	askNames    = map[askWay]string{askNone: "none", askOnSession: "session", askInResult: "result"}
	replyNames  = map[reply]string{replyTask: "task", replyQuestionFirst: "question-first", replyAwait: "await", replyAwaitOrAsk: "await-or-ask"}
	ignoreNames = map[ignoredAnswer]string{
		ignoredNoFormApproval: "no-form-approval", ignoredOverFormCap: "over-form-cap", ignoredProtocol: "protocol",
		ignoredUndeclared: "undeclared", ignoredNoQuestion: "no-question", ignoredNotElicitation: "not-elicitation",
	}
)

// planColumns is the right side of a table row: every field of p that the
// table shows, by name.
func planColumns(t *testing.T, p callPlan) []string {
	t.Helper()
	channel := cmpOr(string(p.Channel), "none")
	acceptance := "none"
	if p.ApprovalRequired {
		acceptance = "required," + cmpOr(string(p.Request), "none")
	} else if p.Request != ledger.RequestNone {
		t.Errorf("a call that needs no approval leaves %q behind without one", p.Request)
	}
	var answer string
	switch p.Answer {
	case answerNone:
		answer = "none"
	case answerTake:
		answer = "take:" + p.Nonce
	case answerIgnore:
		answer = "ignore:" + ignoreNames[p.Ignored]
		if p.IgnoredWhy == "" {
			t.Errorf("an ignored answer (%s) has no reason to log", answer)
		}
	case answerURLOnly:
		answer = "url-only"
	}
	if p.Answer != answerIgnore && (p.Ignored != ignoredNot || p.IgnoredWhy != "") {
		t.Errorf("answer %s has a reason to ignore it: %v %q", answer, p.Ignored, p.IgnoredWhy)
	}
	url := askNames[p.URLAsk]
	if p.Announce {
		url += "+announce"
	}
	answers := cmpOr(p.AnswersTask, "-")
	return []string{channel, acceptance, answer, askNames[p.FormAsk], url, answers, replyNames[p.Reply]}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// planRows reads a table: the inputs left of each row's bar, keyed by
// their text, and the columns right of it.
func planRows(t *testing.T, table string) map[string][]string {
	t.Helper()
	rows := map[string][]string{}
	for _, line := range strings.Split(table, "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		in, out, ok := strings.Cut(line, "|")
		if !ok {
			t.Fatalf("row %q has no bar", line)
		}
		key := strings.Join(strings.Fields(in), " ")
		if _, dup := rows[key]; dup {
			t.Fatalf("row %q appears twice", key)
		}
		rows[key] = strings.Fields(out)
	}
	return rows
}

// Every combination has its row, and every row holds: a rule that changes
// fails the rows it changes.
func TestPlanCall(t *testing.T) {
	rows := planRows(t, planTable)
	n := 0
	for _, client := range planClients {
		for _, caps := range planCaps {
			for _, pol := range planPolicies {
				for _, answer := range planAnswers {
					n++
					key := strings.Join([]string{client, caps, pol, answer}, " ")
					want, ok := rows[key]
					if !ok {
						t.Errorf("no row for %s", key)
						continue
					}
					call := planCaller(t, client, caps)
					planAnswer(t, call, answer)
					tool := planPolicy(t, pol)
					f, c := factsOf(call)
					p := planCall(f, c, tool, planEstimate, time.Minute)
					if got := planColumns(t, p); strings.Join(got, " ") != strings.Join(want, " ") {
						t.Errorf("%s:\n got  %s\n want %s", key, strings.Join(got, " "), strings.Join(want, " "))
					}
					// What a client's tasks/cancel does is decided when it
					// asks, not in the call's plan.
					tool.ClientCancel = ledger.ClientCancelBeforeSend
					if kept := planCall(f, c, tool, planEstimate, time.Minute); kept != p {
						t.Errorf("%s: client_cancel: before_send changes the plan:\n %+v\n %+v", key, kept, p)
					}
				}
			}
		}
	}
	if len(rows) != n {
		t.Errorf("the table has %d rows for %d combinations", len(rows), n)
	}
}

// replyTable is what a call is answered with once accepted, and how long
// it waits, for every client and capability, under a tool without
// input_before_task or wait of its own (plain) and one with both (ibt:
// input_before_task 30s, wait 2m). The gateway's wait is 1m. Right of the
// bar: reply, question wait, wait, and the reply once the call answers its
// question (it answers task T1's question, and its operation is T1).
const replyTable = `
# client   caps     tool  | reply          qwait wait  reply-once-answered
plain-2025 none     plain | await          0s    1m0s  await
plain-2025 none     ibt   | await          0s    2m0s  await
plain-2025 form     plain | await          0s    1m0s  await
plain-2025 form     ibt   | await          0s    2m0s  await
plain-2025 url      plain | await          0s    1m0s  await
plain-2025 url      ibt   | await          0s    2m0s  await
plain-2025 form+url plain | await          0s    1m0s  await
plain-2025 form+url ibt   | await          0s    2m0s  await

tasks-2025 none     plain | task           0s    0s    task
tasks-2025 none     ibt   | task           0s    0s    task
tasks-2025 form     plain | task           0s    0s    task
tasks-2025 form     ibt   | task           0s    0s    task
tasks-2025 url      plain | task           0s    0s    task
tasks-2025 url      ibt   | task           0s    0s    task
tasks-2025 form+url plain | task           0s    0s    task
tasks-2025 form+url ibt   | task           0s    0s    task

plain-2026 none     plain | await          0s    1m0s  await
plain-2026 none     ibt   | await          0s    2m0s  await
plain-2026 form     plain | await-or-ask   0s    1m0s  await-or-ask
plain-2026 form     ibt   | await-or-ask   0s    2m0s  await-or-ask
plain-2026 url      plain | await-or-ask   0s    1m0s  await-or-ask
plain-2026 url      ibt   | await-or-ask   0s    2m0s  await-or-ask
plain-2026 form+url plain | await-or-ask   0s    1m0s  await-or-ask
plain-2026 form+url ibt   | await-or-ask   0s    2m0s  await-or-ask

tasks-2026 none     plain | task           0s    0s    task
tasks-2026 none     ibt   | task           0s    0s    task
tasks-2026 form     plain | task           0s    0s    task
tasks-2026 form     ibt   | question-first 30s   0s    task
tasks-2026 url      plain | task           0s    0s    task
tasks-2026 url      ibt   | question-first 30s   0s    task
tasks-2026 form+url plain | task           0s    0s    task
tasks-2026 form+url ibt   | question-first 30s   0s    task
`

// A call's reply depends on its client, what it declared and the tool's
// input_before_task; its wait is the tool's, or else the gateway's.
func TestPlanCallReply(t *testing.T) {
	rows := planRows(t, replyTable)
	n := 0
	for _, client := range planClients {
		for _, caps := range planCaps {
			for _, pol := range []string{"plain", "ibt"} {
				n++
				key := strings.Join([]string{client, caps, pol}, " ")
				want, ok := rows[key]
				if !ok {
					t.Errorf("no row for %s", key)
					continue
				}
				tool := planPolicy(t, "none")
				if pol == "ibt" {
					tool.InputBeforeTask, tool.Wait = 30*time.Second, 2*time.Minute
				}
				call := planCaller(t, client, caps)
				f, c := factsOf(call)
				p := planCall(f, c, tool, planEstimate, time.Minute)
				planAnswer(t, call, "answers")
				f, c = factsOf(call)
				answering := planCall(f, c, tool, planEstimate, time.Minute)
				got := []string{replyNames[p.Reply], p.QuestionWait.String(), p.Wait.String(), replyNames[answering.replyFor("T1")]}
				if strings.Join(got, " ") != strings.Join(want, " ") {
					t.Errorf("%s:\n got  %s\n want %s", key, strings.Join(got, " "), strings.Join(want, " "))
				}
			}
		}
	}
	if len(rows) != n {
		t.Errorf("the table has %d rows for %d combinations", len(rows), n)
	}
}

// Approval answers the table does not combine: each is ignored, saying
// why, or taken.
func TestPlanCallApprovalAnswer(t *testing.T) {
	roots := &mcp.ListRootsResult{}
	accept := &mcp.ElicitResult{Action: "accept"}
	for _, tt := range []struct {
		name   string
		answer mcp.InputResponse
		state  string
		want   string
	}{
		{"not an elicitation result", roots, approvalStatePrefix + "N1", "ignore:not-elicitation"},
		{"a question without its nonce", accept, approvalStatePrefix, "ignore:no-question"},
		{"the state of a URL question", accept, approvalRequestStatePrefix + "7", "ignore:no-question"},
		{"the state of an upstream's question", accept, questionStatePrefix + "T1", "ignore:no-question"},
		{"a declined question", &mcp.ElicitResult{Action: "decline"}, approvalStatePrefix + "N2", "take:N2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			call := planCaller(t, "plain-2026", "form")
			call.InputResponses = mcp.InputResponseMap{approvalInput: tt.answer}
			call.RequestState = tt.state
			f, c := factsOf(call)
			p := planCall(f, c, planPolicy(t, "both"), planEstimate, time.Minute)
			if got := planColumns(t, p)[2]; got != tt.want {
				t.Errorf("answer = %s, want %s", got, tt.want)
			}
		})
	}
}

// The client is told why its answer approves nothing only where no form
// could approve the call, in words that say what approves it instead.
func TestPlanCallIgnoredAnswerText(t *testing.T) {
	for _, tt := range []struct {
		policy, client string
		told           bool
		want           string
	}{
		{"both/cap0", "plain-2026", true, "this tool takes no approval from a form answer (its elicitation_max_total_cost is 0), so the answer approves nothing: an approver must approve it"},
		{"request", "plain-2026", true, "this tool takes no approval from a form answer (its approve_by does not include elicitation), so the answer approves nothing: an approver must approve it"},
		{"both>cap", "plain-2026", true, "a form answer approves at most 10.00 USD for this tool and this call is estimated at 18.00 USD, so the answer approves nothing: an approver must approve it"},
		{"both", "plain-2025", false, "approval questions are answered this way only on protocol 2026-07-28"},
	} {
		t.Run(tt.policy+"/"+tt.client, func(t *testing.T) {
			call := planCaller(t, tt.client, "form")
			planAnswer(t, call, "approval")
			f, c := factsOf(call)
			p := planCall(f, c, planPolicy(t, tt.policy), planEstimate, time.Minute)
			if p.IgnoredWhy != tt.want || p.Ignored.told() != tt.told {
				t.Errorf("ignored because %q (told: %v), want %q (told: %v)", p.IgnoredWhy, p.Ignored.told(), tt.want, tt.told)
			}
		})
	}
}

// An approval form is asked only after a denial for want of an approval.
func TestPlanFormAsk(t *testing.T) {
	for _, tt := range []struct {
		planned  askWay
		decision ledger.Decision
		reason   string
		want     askWay
	}{
		{askOnSession, ledger.DecisionDenied, ledger.ReasonApprovalRequired, askOnSession},
		{askInResult, ledger.DecisionDenied, ledger.ReasonApprovalRequired, askInResult},
		{askNone, ledger.DecisionDenied, ledger.ReasonApprovalRequired, askNone},
		{askInResult, ledger.DecisionDenied, ledger.ReasonApprovalExpired, askNone},
		{askInResult, ledger.DecisionCreated, "", askNone},
		{askOnSession, ledger.DecisionAttached, "", askNone},
		{askOnSession, ledger.DecisionConflict, ledger.ReasonApprovalRequired, askNone},
	} {
		p := callPlan{FormAsk: tt.planned}
		if got := p.formAsk(tt.decision, tt.reason); got != tt.want {
			t.Errorf("planned %s, %s (%s): asks %s, want %s", askNames[tt.planned], tt.decision, tt.reason, askNames[got], askNames[tt.want])
		}
	}
}

// The user is sent to the approver while the operation awaits approval: in
// every 2026-07-28 result that does not answer the URL question, and over
// a session once, by the call that filed the request.
func TestPlanURLAsk(t *testing.T) {
	for _, tt := range []struct {
		planned  askWay
		decision ledger.Decision
		state    ledger.State
		want     askWay
	}{
		{askInResult, ledger.DecisionCreated, ledger.StateAwaitingApproval, askInResult},
		{askInResult, ledger.DecisionAttached, ledger.StateAwaitingApproval, askInResult},
		{askOnSession, ledger.DecisionCreated, ledger.StateAwaitingApproval, askOnSession},
		{askOnSession, ledger.DecisionAttached, ledger.StateAwaitingApproval, askNone},
		{askInResult, ledger.DecisionAttached, ledger.StateAccepted, askNone},
		{askOnSession, ledger.DecisionCreated, ledger.StateAccepted, askNone},
		{askNone, ledger.DecisionCreated, ledger.StateAwaitingApproval, askNone},
	} {
		p := callPlan{URLAsk: tt.planned}
		if got := p.urlAsk(tt.decision, tt.state); got != tt.want {
			t.Errorf("planned %s, %s into %s: asks %s, want %s", askNames[tt.planned], tt.decision, tt.state, askNames[got], askNames[tt.want])
		}
	}
}

// A call's answers are recorded only for the operation its requestState
// names, and a call that answers gets its task rather than the question
// again.
func TestPlanAnswers(t *testing.T) {
	for _, tt := range []struct {
		name    string
		planned string
		reply   reply
		task    string
		answers bool
		want    reply
	}{
		{"its operation", "T1", replyQuestionFirst, "T1", true, replyTask},
		{"another operation", "T1", replyQuestionFirst, "T2", false, replyQuestionFirst},
		{"no answers", "", replyQuestionFirst, "T1", false, replyQuestionFirst},
		{"waiting in the call", "T1", replyAwaitOrAsk, "T1", true, replyAwaitOrAsk},
		{"a task at once", "T1", replyTask, "T1", true, replyTask},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := callPlan{AnswersTask: tt.planned, Reply: tt.reply}
			if got := p.answers(tt.task); got != tt.answers {
				t.Errorf("answers(%s) = %v, want %v", tt.task, got, tt.answers)
			}
			if got := p.replyFor(tt.task); got != tt.want {
				t.Errorf("replyFor(%s) = %s, want %s", tt.task, replyNames[got], replyNames[tt.want])
			}
		})
	}
}

// Whether a standing budget may stand in for an approval the call lacks:
// only where one is required, and never where the tool says budgets: false.
func TestPlanCallBudgets(t *testing.T) {
	no, yes := false, true
	for _, tc := range []struct {
		policy  string
		budgets *bool
		want    bool
	}{
		{"none", nil, false},
		{"none", &yes, false},
		{"request", nil, true},
		{"request", &yes, true},
		{"request", &no, false},
		{"both", nil, true},
		{"both", &no, false},
	} {
		tool := planPolicy(t, tc.policy)
		tool.Budgets = tc.budgets
		f, c := factsOf(planCaller(t, planClients[0], planCaps[0]))
		if got := planCall(f, c, tool, planEstimate, time.Minute).Budgets; got != tc.want {
			t.Errorf("policy %s, budgets %v: plan.Budgets = %v; want %v", tc.policy, tc.budgets, got, tc.want)
		}
	}
}
