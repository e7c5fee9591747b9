/*
 * The shim's lifecycles, each one state: the command the shell runs, the
 * next observation coming from the preparer, and the last command's End on
 * its way to being stored. What holds in each state is said at the state;
 * the transitions are pure functions (tested in preload/tests/unit.c). An
 * event that does not apply in a state leaves it as it is: the shim never
 * aborts, and the shell's own call goes ahead whatever the shim expected.
 */
#ifndef PROV_SHIM_STATE_H
#define PROV_SHIM_STATE_H

/* The command the shell runs, as the shim sees it. */
enum command_state {
    /* None runs (the prompt, the line editor): the shell's opens and execs
     * are its own. */
    COMMAND_NONE,
    /* One runs in an observation: its control socket, namespace root,
     * tracker and holder pid are open and Begin went to its collector; the
     * shell's opens and execs go into the namespace unless prompt tools'
     * hooks run (pause_depth > 0). */
    COMMAND_OBSERVED,
    /* One runs without an observation: its Begin went to the preparer,
     * which stores its record, marked untraced, when End follows. */
    COMMAND_UNOBSERVED,
};

/* The next observation, asked of the shell's preparer (`prov __prepare`). */
enum prep_state {
    /* None asked for: the preparer's socket is the preparer waiting for a
     * request, or closed (none started, or it hung up). */
    PREP_IDLE,
    /* Asked for (a request sent, or the preparer just started): its answer
     * is awaited on the preparer's socket. */
    PREP_ASKED,
    /* Asked for, and a command's start waited for the answer in vain: the
     * next starts do not wait again (a hanging helper costs the user one
     * pause, never one per command). The answer is still taken if it comes. */
    PREP_LATE,
    /* Prepared: the ready observation's control socket, namespace root,
     * tracker and holder pid are held for the next command. */
    PREP_READY,
};

enum prep_event {
    PREP_REQUESTED,  /* a request went out, or a preparer was started */
    PREP_MISSED,     /* a start waited for the answer and it did not come */
    PREP_PREPARED,   /* the answer: an observation, with its three descriptors */
    PREP_FAILED,     /* the answer: why not, a malformed one, or a hang-up */
    PREP_TAKEN,      /* the ready one went to a command, or was let go (its collector gone) */
};

static inline enum prep_state prep_next(enum prep_state s, enum prep_event e)
{
    switch (e) {
    case PREP_REQUESTED: return s == PREP_IDLE ? PREP_ASKED : s;
    case PREP_MISSED: return s == PREP_ASKED ? PREP_LATE : s;
    case PREP_PREPARED: return s == PREP_ASKED || s == PREP_LATE ? PREP_READY : s;
    case PREP_FAILED: return s == PREP_ASKED || s == PREP_LATE ? PREP_IDLE : s;
    case PREP_TAKEN: return s == PREP_READY ? PREP_IDLE : s;
    }
    return s;
}

/* Whether an answer is awaited from the preparer. */
static inline int prep_awaited(enum prep_state s) { return s == PREP_ASKED || s == PREP_LATE; }

/* The last observed command's End and its record's control socket. */
enum end_state {
    /* Nothing to follow: no ended record's control socket is open. */
    END_NONE,
    /* End is written and held, not yet sent: it goes out when the shell
     * waits anyway (send_pending_end), so the collector does not take the
     * CPU while the prompt is drawn. */
    END_HELD,
    /* End is sent and Stored not yet read: End is kept, to go to the
     * preparer should the answer say the record was not stored. */
    END_SENT,
};

enum end_event {
    END_WRITTEN,     /* a command ended and its End is held (the last one's socket let go) */
    END_SEND_OK,     /* the held End went out */
    END_DONE,        /* Stored was read or waited for, the collector is gone, or there was no End to hold */
};

static inline enum end_state end_next(enum end_state s, enum end_event e)
{
    switch (e) {
    case END_WRITTEN: return END_HELD;
    case END_SEND_OK: return s == END_HELD ? END_SENT : s;
    case END_DONE: return END_NONE;
    }
    return s;
}

#endif
