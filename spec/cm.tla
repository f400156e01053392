---------------------------------- MODULE cm ----------------------------------
(***************************************************************************)
(* The InfiniBand Communication Manager (IBTA Vol 1 ch. 12): N CM nodes    *)
(* exchanging every CM message (REQ, MRA, REJ, REP, RTU, DREQ, DREP, LAP,  *)
(* APR, SIDR_REQ, SIDR_REP and Get(ClassPortInfo)) over a network that     *)
(* loses, duplicates and reorders; listens with service-ID masks; timeouts *)
(* and retries; TimeWait; the engine's resource bounds; crashes that       *)
(* restart a node's CM, and its comm-ID allocator with it.                 *)
(*                                                                         *)
(* Every per-id step goes through Table and LAPTable (module CMTable),    *)
(* which gen/ emits from the same definition as the Go engine's table,    *)
(* and every state set consulted here is the definition's. This module    *)
(* adds what a table cannot say: how a received message finds its id (the *)
(* remote-ID, remote-QPN, listen and SIDR tables), which is where the      *)
(* TimeWait stale-connection bug lived, the network, and crashes.          *)
(*                                                                         *)
(* Action names are the engine's event names (engine.Event.String()).      *)
(* The obligations (at the end) are stated independently of the table:    *)
(* they are what the protocol owes, whatever the definition says.          *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets, TLC, CMTable

CONSTANTS
    Nodes,              \* CM nodes; node n's CA GUID and port are n
    Clients,            \* nodes whose applications Connect (to any other node)
    Servers,            \* nodes that listen on ServedIDs from the start, and again after a crash
    ServedIDs,          \* the service IDs a server listens on (exact match)
    Listeners,          \* nodes whose applications call Listen, and destroy listens,
    ListenIDs,          \*   with a service ID from ListenIDs
    ListenMasks,        \*   and a mask from ListenMasks
    SIDBits,            \* service IDs and masks are SIDBits-bit numbers
    BitWeight(_),       \* the engine bits a service-ID bit stands for (a mask's specificity)
    ServiceIDs,         \* the service IDs a Connect or a SIDR request asks for
    SIDRClients,        \* nodes whose applications send SIDR requests
    Handles,            \* id slots per node, 1..k: the engine's MaxIDs
    MaxCommID,          \* local comm IDs 1..MaxCommID per node (0 means "none")
    QPNs,               \* local QP numbers per node (0 means "none")
    Retries,            \* the Max CM Retries a REQ or a SIDR request may carry
    AltPaths,           \* whether a Connect's REQ carries an alternate path (a subset of BOOLEAN)
    LAP,                \* applications load alternate paths (LAP/APR)
    PortInfo,           \* peers query the CM's ClassPortInfo
    MaxHalfOpen,        \* engine bound: a node's half-open ids
    MaxHalfOpenPerPeer, \* engine bound: a node's half-open ids of one peer
    DropExcessREQ,      \* a REQ beyond a bound is dropped instead of getting REJ 3
    MaxCrashes,         \* crash/restart budget
    MaxNet,             \* messages in flight (state constraint)
    Loss,               \* the network may lose a message
    Duplicate,          \* the network may deliver a message twice
    LegacyTimeWaitQPN,  \* pre-fix Linux: the remote QPN stays in its table during TimeWait
    StaleCheck,         \* passive stale-connection detection (12.4.1) is on
    FreshCommIDs,       \* a restarted CM's allocator starts afresh (the engine); FALSE: it repeats its sequence
    MaxDepth            \* bound on behaviour length for breadth-first search; 0: none

VARIABLES
    conn,       \* conn[n][h]: the id in slot h of node n
    ridTable,   \* ridTable[n]: remote-ID table, <<remote node, remote comm ID, handle>>
    qpnTable,   \* qpnTable[n]: remote-QPN table, <<remote node, remote QPN, handle>>
    lsnTable,   \* lsnTable[n]: listen table, <<service ID, mask, handle>>
    sidrTable,  \* sidrTable[n]: SIDR table, <<requester, request ID, handle>>
    net,        \* messages in flight; a set, so order is free
    nextLid,    \* nextLid[n]: the comm ID allocator's cursor
    inc,        \* inc[n]: ghost, node n's incarnation (1 + its crashes)
    crashes,    \* crashes so far
    bogusStale, \* history: a REJ(10) went out with no connected id matching
    broken      \* history: the obligations some step broke (their names)

vars == <<conn, ridTable, qpnTable, lsnTable, sidrTable, net, nextLid, inc, crashes, bogusStale, broken>>

CommIDs == 1..MaxCommID
Incs == 1..(MaxCrashes + 1)
MaxRetry == IF Retries = {} THEN 0 ELSE CHOOSE r \in Retries : \A s \in Retries : s <= r
SIDs == 0..(2^SIDBits - 1)
ExactMask == 2^SIDBits - 1
UnitWeight(i) == 1

Conn == [state : States, lid : CommIDs \cup {0}, qpn : QPNs \cup {0},
         rnode : Nodes \cup {0}, rid : CommIDs \cup {0}, rqpn : QPNs \cup {0},
         retries : 0..MaxRetry, maxr : 0..MaxRetry, lap : LAPStates, alt : BOOLEAN,
         active : BOOLEAN, sid : SIDs, mask : SIDs, rinc : Incs \cup {0}]

\* An id's fields: lid its comm ID (a listen's is never on the wire: 0), qpn
\* its QP, rnode/rid/rqpn the peer's node, comm ID and QP, retries the
\* retries left of the outstanding message, maxr its Max CM Retries, lap the
\* alternate-path sub-state, alt whether an alternate path is loaded, active
\* whether it sent the REQ, sid/mask the service ID (and a listen's mask),
\* rinc (ghost) the incarnation of the peer it is bound to (0: none yet).
IdleConn == [state |-> "IDLE", lid |-> 0, qpn |-> 0, rnode |-> 0, rid |-> 0, rqpn |-> 0,
             retries |-> 0, maxr |-> 0, lap |-> LAPOff, alt |-> FALSE, active |-> FALSE,
             sid |-> 0, mask |-> 0, rinc |-> 0]

\* One message. lid is the sender's comm ID (a SIDR_REQ's request ID), rid
\* the receiver's (0 when not yet known; a SIDR_REP's request ID), qpn the
\* sender's QPN (REQ, REP) or the receiver's (DREQ, LAP); info the REJ
\* reason, APR status or SIDR_REP status; what the message an MRA delays or
\* a REJ rejects (0 REQ, 1 REP, 2 other, as on the wire); sid, retries and
\* alt the REQ's (sid also a SIDR_REQ's); inc (ghost) the sender's
\* incarnation, 0 for a stateless answer, which speaks for no id.
MsgTypes == {"REQ", "MRA", "REJ", "REP", "RTU", "DREQ", "DREP", "LAP", "APR",
             "SIDR_REQ", "SIDR_REP", "GET", "GETRESP"}

Message == [type : MsgTypes, src : Nodes, dst : Nodes, lid : CommIDs \cup {0}, rid : CommIDs \cup {0},
            qpn : QPNs \cup {0}, info : 0..40, what : 0..2, sid : SIDs, retries : 0..MaxRetry,
            alt : BOOLEAN, inc : Incs \cup {0}]

NoMsg == [type |-> "NONE"]

TypeOK ==
    /\ conn \in [Nodes -> [Handles -> Conn]]
    /\ ridTable \in [Nodes -> SUBSET (Nodes \X CommIDs \X Handles)]
    /\ qpnTable \in [Nodes -> SUBSET (Nodes \X QPNs \X Handles)]
    /\ lsnTable \in [Nodes -> SUBSET (SIDs \X SIDs \X Handles)]
    /\ sidrTable \in [Nodes -> SUBSET (Nodes \X CommIDs \X Handles)]
    /\ net \subseteq Message
    /\ nextLid \in [Nodes -> 1..(MaxCommID + 1)]
    /\ inc \in [Nodes -> Incs]
    /\ crashes \in 0..MaxCrashes
    /\ bogusStale \in BOOLEAN
    /\ broken \subseteq {"StaleTearsDown", "DuplicateAnswered", "IgnoredChangesNothing",
                         "RejectJustified", "AltPathAgreed", "NoCrossIncarnation",
                         "StaleToTimeWait", "StaleTellsPeer", "RecvREPStaleRejects",
                         "RecvREJToTimeWait", "RejectToTimeWait"}

-----------------------------------------------------------------------------
(* Helpers.                                                                 *)

Min(S) == CHOOSE x \in S : \A y \in S : x <= y

\* The i-th smallest element of S.
Nth(S, i) == CHOOSE x \in S : Cardinality({y \in S : y < x}) = i - 1

\* Service IDs: a listen (sid, mask) takes s when s and sid agree on the
\* mask's bits; the most specific listen (mask bits, weighted) wins; two
\* listens of equal specificity that could take a common service ID are
\* refused (the engine's ErrBusy), so at most one of each specificity matches.
Bit(x, i) == (x \div (2^i)) % 2
RECURSIVE WeightFrom(_, _)
WeightFrom(mask, i) == IF i >= SIDBits THEN 0 ELSE Bit(mask, i) * BitWeight(i) + WeightFrom(mask, i + 1)
Specificity(mask) == WeightFrom(mask, 0)
Matches(s, sid, mask) == \A i \in 0..(SIDBits - 1) : Bit(mask, i) = 1 => Bit(s, i) = Bit(sid, i)
Overlap(s1, m1, s2, m2) == \A i \in 0..(SIDBits - 1) : (Bit(m1, i) = 1 /\ Bit(m2, i) = 1) => Bit(s1, i) = Bit(s2, i)

ListenConn(sid, mask) == [IdleConn EXCEPT !.state = "LISTEN", !.sid = sid, !.mask = mask]

\* A server's listens at start (and after a crash): ServedIDs, exactly, in
\* the first slots.
InitConn(n) == [h \in Handles |-> IF n \in Servers /\ h <= Cardinality(ServedIDs)
                                  THEN ListenConn(Nth(ServedIDs, h), ExactMask) ELSE IdleConn]
InitListens(n) == IF n \in Servers THEN {<<Nth(ServedIDs, h), ExactMask, h>> : h \in 1..Cardinality(ServedIDs)} ELSE {}

Init ==
    /\ conn = [n \in Nodes |-> InitConn(n)]
    /\ ridTable = [n \in Nodes |-> {}]
    /\ qpnTable = [n \in Nodes |-> {}]
    /\ lsnTable = [n \in Nodes |-> InitListens(n)]
    /\ sidrTable = [n \in Nodes |-> {}]
    /\ net = {}
    /\ nextLid = [n \in Nodes |-> 1]
    /\ inc = [n \in Nodes |-> 1]
    /\ crashes = 0
    /\ bogusStale = FALSE
    /\ broken = {}

\* Comm IDs come from a cyclic allocator, as in the engine (and Linux): an ID
\* comes back only after the whole 32-bit space has gone round, long after
\* any message naming it has died. Reusing a just-freed ID at once is wrong
\* even without TimeWait: a late REP for a rejected REQ would then be taken as
\* the answer to a new REQ with another QP (TLC finds that in 9 steps and
\* EstablishedAgree fails). The model's space does not wrap: allocation stops.
CanAlloc(n) == nextLid[n] <= MaxCommID

\* A QP is free once its id is IDLE or in TimeWait: applications destroy and
\* recreate QPs right after DREP, and the lowest free QPN is taken, so the
\* same QPN comes back at once (the seed's workload).
FreeQPNs(n) == {q \in QPNs : \A h \in Handles :
                   conn[n][h].state \notin (States \ {"IDLE", "TIMEWAIT"}) \/ conn[n][h].qpn # q}

\* Slots are interchangeable: a new id takes the lowest free one.
FreeHandles(n) == {h \in Handles : conn[n][h].state = "IDLE"}

\* The oracle, outside the tables: does node n hold a *connected* id for (r, q)?
ConnectedMatch(n, r, q) ==
    \E h \in Handles : conn[n][h].state \in ConnectedStates /\ conn[n][h].rnode = r /\ conn[n][h].rqpn = q

\* The listen that takes service ID sid on node n (through its listen
\* table), or 0.
ListenFor(n, s) == {e \in lsnTable[n] : Matches(s, e[1], e[2])}
Listener(n, s) ==
    IF ListenFor(n, s) = {} THEN 0
    ELSE (CHOOSE e \in ListenFor(n, s) : \A f \in ListenFor(n, s) : Specificity(f[2]) <= Specificity(e[2]))[3]

\* The engine's resource bounds for a REQ from peer r: a free id (MaxIDs),
\* and MaxHalfOpen, MaxHalfOpenPerPeer over the definition's half-open set.
HalfOpenOf(n, r) == Cardinality({h \in Handles : conn[n][h].state \in HalfOpenStates /\ (r = 0 \/ conn[n][h].rnode = r)})
Room(n, r) == FreeHandles(n) # {} /\ HalfOpenOf(n, 0) < MaxHalfOpen /\ HalfOpenOf(n, r) < MaxHalfOpenPerPeer

\* A timer runs (and counts retries) in the definition's timer states; in
\* ESTABLISHED, which runs the alternate-path sub-state, while a LAP awaits
\* its APR.
TimerRuns(s, lap) == IF s \in LAPHostStates THEN lap \in LAPTimerStates ELSE s \in TimerStates

-----------------------------------------------------------------------------
(* One table step. A node view nd = [conn, rid, qpn, lsn, sidr, out] is     *)
(* threaded through the steps of one action, so one input can move two ids *)
(* (a stale REQ moves the old id) and still commit atomically.             *)

NodeView(n) == [conn |-> conn[n], rid |-> ridTable[n], qpn |-> qpnTable[n], lsn |-> lsnTable[n],
                sidr |-> sidrTable[n], out |-> {}]

Msg0(type, src, dst) == [type |-> type, src |-> src, dst |-> dst, lid |-> 0, rid |-> 0, qpn |-> 0,
                         info |-> 0, what |-> 0, sid |-> 0, retries |-> 0, alt |-> FALSE, inc |-> 0]

WhatOf(about) == CASE about = "REQ" -> 0 [] about = "REP" -> 1 [] OTHER -> 2

\* The message cell t sends for id c of node n (Resend rebuilds the same
\* copy), with x the call's REJ reason or APR/SIDR_REP status and m the
\* message being answered, if any.
Out(n, c, t, x, m) ==
    LET m0 == [Msg0(t.send, n, c.rnode) EXCEPT !.lid = c.lid, !.rid = c.rid, !.inc = inc[n]]
        r  == IF t.reason # 0 THEN t.reason ELSE x
    IN CASE t.send = "NONE" -> {}
         [] t.send = "REQ"  -> {[m0 EXCEPT !.rid = 0, !.qpn = c.qpn, !.sid = c.sid, !.retries = c.maxr, !.alt = c.alt]}
         [] t.send = "REP"  -> {[m0 EXCEPT !.qpn = c.qpn]}
         \* Resend: only the side that sent an RTU has one to resend.
         [] t.send = "RTU"  -> IF "Resend" \in t.effects /\ ~c.active THEN {} ELSE {m0}
         [] t.send = "MRA"  -> {[m0 EXCEPT !.what = WhatOf(t.about)]}
         \* A REJ from a state whose comm ID the peer never heard names none.
         [] t.send = "REJ"  -> {[m0 EXCEPT !.lid = IF c.state \in UnannouncedStates THEN 0 ELSE c.lid,
                                           !.info = r, !.what = WhatOf(t.about)]}
         [] t.send = "DREQ" -> {[m0 EXCEPT !.qpn = c.rqpn]}
         \* Answering a DREQ, the DREP names its sender.
         [] t.send = "DREP" -> {[m0 EXCEPT !.rid = IF m.type = "DREQ" THEN m.lid ELSE c.rid]}
         [] t.send = "LAP"  -> {[m0 EXCEPT !.qpn = c.rqpn]}
         [] t.send = "APR"  -> {[m0 EXCEPT !.info = r]}
         [] t.send = "SIDR_REQ" -> {[m0 EXCEPT !.rid = 0, !.sid = c.sid]}
         [] t.send = "SIDR_REP" -> {[m0 EXCEPT !.lid = 0, !.info = r]}

\* The id after a step of the connection table, or of the alternate-path
\* table. The retries count while a timer runs.
Counted(c, t, s, lap) ==
    CASE ~TimerRuns(s, lap) -> 0            \* no timer: nothing to count
      [] "StartTimer" \in t.effects -> c.maxr
      [] "StartLapse" \in t.effects -> 0     \* the peer retries; we only wait
      [] "Retry" \in t.effects -> c.retries - 1
      [] OTHER -> c.retries

After(c, t) ==
    IF "Free" \in t.effects THEN IdleConn
    ELSE LET lap == CASE "EnterLAP" \in t.effects -> LAPStart(c.alt)
                      [] "ExitLAP" \in t.effects -> LAPOff
                      [] OTHER -> c.lap
         IN [c EXCEPT !.state = t.next, !.lap = lap, !.retries = Counted(c, t, t.next, lap)]

AfterLAP(c, t) ==
    [c EXCEPT !.lap = t.next, !.alt = c.alt \/ "LoadAlt" \in t.effects,
              !.retries = Counted(c, t, c.state, t.next)]

RIDAfter(h, c, t, tab) ==
    CASE "InsertRemoteID" \in t.effects -> tab \cup {<<c.rnode, c.rid, h>>}
      [] "RemoveRemoteID" \in t.effects -> {e \in tab : e[3] # h}
      [] OTHER -> tab

\* The seed fix: the entry leaves on entering TimeWait. Legacy: on leaving it.
QPNAfter(h, c, t, tab) ==
    CASE "InsertRemoteQPN" \in t.effects -> tab \cup {<<c.rnode, c.rqpn, h>>}
      [] "RemoveRemoteQPN" \in t.effects /\ ~(LegacyTimeWaitQPN /\ "EnterTimeWait" \in t.effects) ->
            {e \in tab : e[3] # h}
      [] LegacyTimeWaitQPN /\ "ExitTimeWait" \in t.effects -> {e \in tab : e[3] # h}
      [] OTHER -> tab

LsnAfter(h, c, t, tab) ==
    CASE "InsertListen" \in t.effects -> tab \cup {<<c.sid, c.mask, h>>}
      [] "RemoveListen" \in t.effects -> {e \in tab : e[3] # h}
      [] OTHER -> tab

SIDRAfter(h, c, t, tab) ==
    CASE "InsertSIDR" \in t.effects -> tab \cup {<<c.rnode, c.rid, h>>}
      [] "RemoveSIDR" \in t.effects -> {e \in tab : e[3] # h}
      [] OTHER -> tab

\* Does the table let event ev move id c (in the sub-table for a LAP event
\* of a state that delegates it)?
Allows(c, ev) ==
    LET t == Table[c.state][ev]
    IN t.kind = "Transition" \/ (t.kind = "Sub" /\ LAPTable[c.lap][ev].kind = "Transition")

\* Apply event ev to id h of node n, whose record (with any fields the input
\* sets) is c. Drop and Invalid cells leave everything as it was.
Do(nd, n, h, c, ev, x, m) ==
    LET t == Table[c.state][ev]
    IN IF t.kind = "Transition"
       THEN [conn |-> [nd.conn EXCEPT ![h] = After(c, t)],
             rid  |-> RIDAfter(h, c, t, nd.rid),
             qpn  |-> QPNAfter(h, c, t, nd.qpn),
             lsn  |-> LsnAfter(h, c, t, nd.lsn),
             sidr |-> SIDRAfter(h, c, t, nd.sidr),
             out  |-> nd.out \cup Out(n, c, t, x, m)]
       ELSE IF t.kind = "Sub" /\ LAPTable[c.lap][ev].kind = "Transition"
       THEN LET lt == LAPTable[c.lap][ev]
            IN [nd EXCEPT !.conn = [@ EXCEPT ![h] = AfterLAP(c, lt)], !.out = @ \cup Out(n, c, lt, x, m)]
       ELSE nd

\* A message that matches no id takes the IDLE row: a stateless answer built
\* from the message itself (x: the engine's REJ reason), or nothing.
Reply(nd, n, m, ev, x) ==
    LET t == Table["IDLE"][ev]
        a == Msg0(t.send, n, m.src)
        r == IF t.reason # 0 THEN t.reason ELSE x
    IN IF t.kind = "Stateless"
       THEN [nd EXCEPT !.out = @ \cup
               CASE t.send = "REJ"      -> {[a EXCEPT !.rid = m.lid, !.info = r, !.what = WhatOf(t.about)]}
                 [] t.send = "DREP"     -> {[a EXCEPT !.lid = m.rid, !.rid = m.lid]}
                 [] t.send = "APR"      -> {[a EXCEPT !.lid = m.rid, !.rid = m.lid, !.info = r]}
                 [] t.send = "SIDR_REP" -> {[a EXCEPT !.rid = m.lid, !.info = r]}
                 [] t.send = "ClassPortInfo" -> {Msg0("GETRESP", n, m.src)}]
       ELSE nd

\* Commit a node view. The input messages in consumed leave the network,
\* unless the network duplicates them (keeps a copy to deliver again).
Commit(n, nd, consumed) ==
    /\ conn' = [conn EXCEPT ![n] = nd.conn]
    /\ ridTable' = [ridTable EXCEPT ![n] = nd.rid]
    /\ qpnTable' = [qpnTable EXCEPT ![n] = nd.qpn]
    /\ lsnTable' = [lsnTable EXCEPT ![n] = nd.lsn]
    /\ sidrTable' = [sidrTable EXCEPT ![n] = nd.sidr]
    /\ \E keep \in (IF Duplicate /\ consumed # {} THEN BOOLEAN ELSE {FALSE}) :
          net' = (IF keep THEN net ELSE net \ consumed) \cup nd.out
    /\ crashes' = crashes

-----------------------------------------------------------------------------
(* The obligations, checked where a step could break them. Each names the  *)
(* obligation it finds broken; the invariants at the end read `broken`.    *)

Check(name, ok) == IF ok THEN {} ELSE {name}

Sent(nd, n, type, lid) == \E x \in nd.out : x.type = type /\ x.src = n /\ x.lid = lid

\* 12.9.8.3.1: a REQ or REP that shows (r, q) stale takes every id of n
\* connected to it out of the connected states, and an established one
\* tells its peer with a DREQ.
TearsDown(n, r, q, nd, except) ==
    Check("StaleTearsDown",
        \A h \in Handles \ {except} :
            (conn[n][h].state \in ConnectedStates /\ conn[n][h].rnode = r /\ conn[n][h].rqpn = q)
                => /\ nd.conn[h].state \notin ConnectedStates
                   /\ conn[n][h].state = "ESTABLISHED" => Sent(nd, n, "DREQ", conn[n][h].lid))

\* Whom a stale id's peer hears from, by the state the id was in: an
\* established one tells it with a DREQ; one not yet established (its peer
\* may still await a REP or an RTU, or sit in REP_RCVD) with REJ(10); one
\* that received a DREQ with the DREP it owes; one that sent a DREQ has
\* told it already.
StaleOwes(s) == CASE s = "ESTABLISHED" -> "DREQ"
                  [] s = "DREQ_RCVD"   -> "DREP"
                  [] s = "DREQ_SENT"   -> "NONE"
                  [] OTHER             -> "REJ"

\* 12.9.8.3.1, event Stale: every id of n connected to the (r, q) a REQ or
\* REP showed stale goes to TIMEWAIT, whatever connected state it was in
\* (its QP waits out the old connection's packets before it is reused), and
\* tells its peer (StaleOwes): a REJ names the peer's comm ID and gives
\* reason 10. StaleTearsDown is the weaker "no longer connected".
StaleMatched(n, r, q, except) ==
    {h \in Handles \ {except} : conn[n][h].state \in ConnectedStates /\ conn[n][h].rnode = r /\ conn[n][h].rqpn = q}

CheckStaleToTimeWait(n, r, q, nd, except) ==
    Check("StaleToTimeWait", \A h \in StaleMatched(n, r, q, except) : nd.conn[h].state = "TIMEWAIT")

CheckStaleTellsPeer(n, r, q, nd, except) ==
    Check("StaleTellsPeer",
        \A h \in StaleMatched(n, r, q, except) :
            LET c == conn[n][h] IN
            CASE StaleOwes(c.state) = "REJ" ->
                    \E x \in nd.out : x.type = "REJ" /\ x.dst = c.rnode /\ x.rid = c.rid /\ x.info = 10
              [] StaleOwes(c.state) = "NONE" -> TRUE
              [] OTHER -> Sent(nd, n, StaleOwes(c.state), c.lid))

\* 12.9.8.3.1, event RecvREPStale: the id whose REP showed another id stale
\* rejects that REP with REJ(10, message REP) to its sender, and does not
\* connect.
CheckRecvREPStaleRejects(n, h, m, nd) ==
    Check("RecvREPStaleRejects",
        /\ \E x \in nd.out : x.type = "REJ" /\ x.dst = m.src /\ x.rid = m.lid /\ x.info = 10 /\ x.what = 1
        /\ nd.conn[h].state \notin ConnectedStates)

\* 12.6.7 and the state diagrams of 12.9, events RecvREJ and RecvREJStale
\* (Linux's cm_rej_handler does the same): a REJ ends the attempt or the
\* connection of the id it reaches, which goes to TIMEWAIT when the REJ
\* says stale connection (10: the QP must wait out the old connection's
\* packets) or when the id had received a REP or got further (REP_RCVD,
\* MRA_REP_SENT, ESTABLISHED, DREQ_SENT: its QP is ready to send); before
\* that it may be freed. A state not named here ignores a REJ.
RejEnds == {"REQ_SENT", "MRA_REQ_RCVD", "REQ_RCVD", "MRA_REQ_SENT", "REP_SENT", "MRA_REP_RCVD",
            "REP_RCVD", "MRA_REP_SENT", "ESTABLISHED", "DREQ_SENT"}
RejToTimeWait == {"REP_RCVD", "MRA_REP_SENT", "ESTABLISHED", "DREQ_SENT"}

CheckRecvREJToTimeWait(c, m, ns) ==
    Check("RecvREJToTimeWait",
        c.state \in RejEnds =>
            IF m.info = 10 \/ c.state \in RejToTimeWait THEN ns = "TIMEWAIT" ELSE ns \in {"TIMEWAIT", "IDLE"})

\* The state diagrams of 12.9, events Reject and Destroy (Linux's
\* cm_send_rej_locked does the same): an id that sent its REP and then
\* rejects, or is let go with a REJ, goes to TIMEWAIT: the peer may have
\* taken the REP and readied its QP.
CheckRejectToTimeWait(n, h, ev, nd) ==
    Check("RejectToTimeWait",
        (ev \in {"Reject", "Destroy"} /\ conn[n][h].state \in {"REP_SENT", "MRA_REP_RCVD"}
         /\ \E x \in nd.out : x.type = "REJ" /\ x.src = n)
            => nd.conn[h].state = "TIMEWAIT")

\* A duplicate of a request the id answered gets the answer again: it says
\* the answer was lost (12.9.8: the spec treats a duplicate REQ as a retry).
Owed(s, type) ==
    CASE type = "REQ" /\ s = "MRA_REQ_SENT"                 -> "MRA"
      [] type = "REQ" /\ s \in {"REP_SENT", "MRA_REP_RCVD"} -> "REP"
      [] type = "REP" /\ s = "MRA_REP_SENT"                 -> "MRA"
      [] type = "DREQ" /\ s = "TIMEWAIT"                    -> "DREP"
      [] OTHER -> "NONE"

Answered(n, c, m, nd) ==
    LET owed == IF m.type = "REP" /\ c.state = "ESTABLISHED" /\ c.active THEN "RTU"
                ELSE IF m.type = "LAP" /\ c.state = "ESTABLISHED" /\ c.lap = "MRA_LAP_SENT" THEN "MRA"
                ELSE Owed(c.state, m.type)
    IN Check("DuplicateAnswered", owed = "NONE" \/ Sent(nd, n, owed, c.lid))

\* What the protocol says to ignore changes nothing and answers nothing: a
\* DREQ naming another QPN (12.9.8.4), an RTU once established, a reply
\* that matches no id.
Ignored(n, h, m, ev, nd) ==
    LET ignore == \/ ev = "RecvDREQOtherQPN"
                  \/ ev = "RecvRTU" /\ h # 0 /\ conn[n][h].state = "ESTABLISHED"
                  \/ h = 0 /\ m.type \in {"MRA", "REJ", "REP", "RTU", "DREP", "APR", "SIDR_REP"}
    IN Check("IgnoredChangesNothing", ~ignore \/ (nd.conn = conn[n] /\ nd.out = {}))

\* A stateless REJ answering a REQ gives the reason the situation calls for
\* (10 stale, 8 nobody listens, 3 no resources); so does a SIDR_REP (1).
RejectIs(nd, m, type, reason) ==
    Check("RejectJustified", \A x \in nd.out : (x.type = type /\ x.dst = m.src /\ x.rid = m.lid) => x.info = reason)

\* An id bound to one incarnation of its peer never takes a message from
\* another: a restarted CM must not reuse its previous life's comm IDs.
Crossed(c, m) == Check("NoCrossIncarnation", c.rinc = 0 \/ m.inc = 0 \/ c.rinc = m.inc)

\* The ESTABLISHED peer of an established id c of node n, if any.
PeerEnds(n, c) == {<<b, y>> \in (Nodes \ {n}) \X Handles :
                     /\ conn[b][y].state = "ESTABLISHED" /\ c.rnode = b /\ c.rid = conn[b][y].lid
                     /\ conn[b][y].rnode = n /\ conn[b][y].rid = c.lid}

\* 12.8: an id loads an alternate path from an APR only once its peer
\* loaded it, as it sent the accepting APR.
AltAgreed(n, h, nd) ==
    Check("AltPathAgreed",
        (nd.conn[h].alt /\ ~conn[n][h].alt) => \A p \in PeerEnds(n, conn[n][h]) : conn[p[1]][p[2]].alt)

-----------------------------------------------------------------------------
(* Application calls.                                                       *)

\* ConnectWith and AcceptWith take the QPN the application chose; the model
\* checks the lowest free one (QPNs are interchangeable), trace validation
\* (Tracecm.tla) the one the engine's trace names, even one still in use.
ConnectWith(n, h, r, q, s, k, alt) ==
    /\ n \in Clients
    /\ r \in Nodes \ {n}   \* a node that does not listen answers REJ 8
    /\ conn[n][h].state = "IDLE"
    /\ CanAlloc(n)
    /\ LET c == [IdleConn EXCEPT !.lid = nextLid[n], !.qpn = q, !.rnode = r, !.sid = s, !.maxr = k,
                                 !.alt = alt, !.active = TRUE]
       IN Commit(n, Do(NodeView(n), n, h, c, "Connect", 0, NoMsg), {})
    /\ nextLid' = [nextLid EXCEPT ![n] = @ + 1]
    /\ UNCHANGED <<inc, bogusStale, broken>>

Connect(n) ==
    /\ FreeQPNs(n) # {} /\ FreeHandles(n) # {}
    /\ \E r \in Nodes \ {n}, s \in ServiceIDs, k \in Retries, alt \in AltPaths :
          ConnectWith(n, Min(FreeHandles(n)), r, Min(FreeQPNs(n)), s, k, alt)

\* A listen that could take a service ID together with another of the same
\* specificity is refused (ErrBusy): the call changes nothing.
ListenWith(n, h, s, mask) ==
    /\ conn[n][h].state = "IDLE"
    /\ ~\E e \in lsnTable[n] : Specificity(e[2]) = Specificity(mask) /\ Overlap(e[1], e[2], s, mask)
    /\ Commit(n, Do(NodeView(n), n, h, [IdleConn EXCEPT !.sid = s, !.mask = mask], "Listen", 0, NoMsg), {})
    /\ UNCHANGED <<nextLid, inc, bogusStale, broken>>

Listen(n) ==
    /\ n \in Listeners /\ FreeHandles(n) # {}
    /\ \E s \in ListenIDs, mask \in ListenMasks : ListenWith(n, Min(FreeHandles(n)), s, mask)

SIDRRequestWith(n, h, r, s, k) ==
    /\ n \in SIDRClients
    /\ r \in Nodes \ {n}
    /\ conn[n][h].state = "IDLE"
    /\ CanAlloc(n)
    /\ LET c == [IdleConn EXCEPT !.lid = nextLid[n], !.rnode = r, !.sid = s, !.maxr = k]
       IN Commit(n, Do(NodeView(n), n, h, c, "SIDRRequest", 0, NoMsg), {})
    /\ nextLid' = [nextLid EXCEPT ![n] = @ + 1]
    /\ UNCHANGED <<inc, bogusStale, broken>>

SIDRRequest(n) ==
    /\ FreeHandles(n) # {}
    /\ \E r \in Nodes \ {n}, s \in ServiceIDs, k \in Retries : SIDRRequestWith(n, Min(FreeHandles(n)), r, s, k)

\* The calls that need nothing but the id: enabled where the table has a
\* step; x is the REJ reason or the APR or SIDR_REP status the call gives.
AppCall(n, h, ev, x) ==
    LET nd == Do(NodeView(n), n, h, conn[n][h], ev, x, NoMsg) IN
    /\ Allows(conn[n][h], ev)
    /\ Commit(n, nd, {})
    /\ UNCHANGED <<nextLid, inc, bogusStale>>
    /\ broken' = broken \cup CheckRejectToTimeWait(n, h, ev, nd)

\* The passive side's QP comes with the REP: the application creates it when
\* it accepts (the REP carries its QPN), not when the REQ arrives.
AcceptWith(n, h, q) ==
    /\ Allows(conn[n][h], "Accept")
    /\ Commit(n, Do(NodeView(n), n, h, [conn[n][h] EXCEPT !.qpn = q], "Accept", 0, NoMsg), {})
    /\ UNCHANGED <<nextLid, inc, bogusStale, broken>>

\* Each action is a conjunction at its top, so TLC labels its steps with the
\* action's name (-dump dot,actionlabels); no call applies to an IDLE slot.
Accept(n, h)      == FreeQPNs(n) # {} /\ AcceptWith(n, h, Min(FreeQPNs(n)))
SendMRA(n, h)     == conn[n][h].state # "IDLE" /\ AppCall(n, h, "SendMRA", 0)
SendRTU(n, h)     == conn[n][h].state # "IDLE" /\ AppCall(n, h, "SendRTU", 0)
Reject(n, h)      == conn[n][h].state # "IDLE" /\ AppCall(n, h, "Reject", 28)
Disconnect(n, h)  == conn[n][h].state # "IDLE" /\ AppCall(n, h, "Disconnect", 0)
SendDREP(n, h)    == conn[n][h].state # "IDLE" /\ AppCall(n, h, "SendDREP", 0)
CommEst(n, h)     == conn[n][h].state # "IDLE" /\ AppCall(n, h, "CommEst", 0)
LoadAltPath(n, h) == LAP /\ conn[n][h].state # "IDLE" /\ AppCall(n, h, "LoadAltPath", 0)
AnswerLAP(n, h)   == conn[n][h].state # "IDLE" /\ AppCall(n, h, "AnswerLAP", 0)
RejectLAP(n, h)   == conn[n][h].state # "IDLE" /\ AppCall(n, h, "RejectLAP", 3)
SIDRReplyWith(n, h, status) == AppCall(n, h, "SIDRReply", status)
SIDRReply(n, h)   == conn[n][h].state # "IDLE" /\ \E status \in {0, 2} : SIDRReplyWith(n, h, status)
\* Only an application that listens lets go of its listens.
Destroy(n, h)     == /\ conn[n][h].state # "IDLE"
                     /\ conn[n][h].state \in ListenStates => n \in Listeners
                     /\ AppCall(n, h, "Destroy", 0)

(* Timers: nondeterministic, as the network's delay is. Which event a      *)
(* timer raises is the definition's TimerEvent.                            *)
TimerIs(n, h, ev) == TimerEvent(conn[n][h].state, conn[n][h].retries > 0) = ev
\* A lapse (LapseStates) runs for as long as the REQ's sender waits for the
\* REP, so it runs out only once the sender has given up on that REQ: no id
\* of the sender still awaits its REP (LearnsREPStates). The one timer
\* whose order against another node's the model fixes; the engine keeps it
\* by timing the lapse from the REQ's arrival for the REQ's whole wait.
SenderGaveUp(n, h) ==
    \A k \in Handles : ~(conn[conn[n][h].rnode][k].state \in LearnsREPStates
                         /\ conn[conn[n][h].rnode][k].lid = conn[n][h].rid)
Timeout(n, h)        == TimerIs(n, h, "Timeout") /\ AppCall(n, h, "Timeout", 0)
TimeoutFinal(n, h)   == /\ TimerIs(n, h, "TimeoutFinal")
                        /\ conn[n][h].state \in LapseStates => SenderGaveUp(n, h)
                        /\ AppCall(n, h, "TimeoutFinal", 0)
TimeWaitExpiry(n, h) == TimerIs(n, h, "TimeWaitExpiry") /\ AppCall(n, h, "TimeWaitExpiry", 0)

-----------------------------------------------------------------------------
(* Receiving. Each message is classified into one event for one id, as the  *)
(* engine's classifier does; the action is named after the event.          *)

\* The id a reply (MRA, REP, RTU, REJ, DREQ, DREP, LAP, APR) is addressed
\* to: our comm ID in rid, in a state that takes replies, and (once known)
\* the peer's comm ID matching, as Linux's cm_acquire_id does. Only a REP
\* carries the sender's CA GUID, which must then match the peer's (once
\* known). A REJ for a REQ we only know by the peer's comm ID (rid = 0) goes
\* through the remote-ID table.
Target(n, m) ==
    LET byLID == {h \in Handles : conn[n][h].state \in ReplyStates
                                  /\ m.rid # 0 /\ conn[n][h].lid = m.rid
                                  /\ (conn[n][h].rid = 0 \/ conn[n][h].rid = m.lid)
                                  /\ (m.type # "REP" \/ conn[n][h].rid = 0 \/ conn[n][h].rnode = m.src)}
        byRID == {e[3] : e \in {e \in ridTable[n] : m.rid = 0 /\ e[1] = m.src /\ e[2] = m.lid}}
    IN IF byLID # {} THEN Min(byLID) ELSE IF byRID # {} THEN Min(byRID) ELSE 0

\* Deliver m as event ev: to its id, or through the IDLE row when it has none.
Deliver(n, m, ev) ==
    LET h  == Target(n, m)
        nd == IF h = 0 THEN Reply(NodeView(n), n, m, ev, 0) ELSE Do(NodeView(n), n, h, conn[n][h], ev, 0, m)
    IN /\ Commit(n, nd, {m})
       /\ UNCHANGED <<nextLid, inc, bogusStale>>
       /\ broken' = broken \cup Ignored(n, h, m, ev, nd)
                  \cup (IF h = 0 THEN {} ELSE Crossed(conn[n][h], m) \cup AltAgreed(n, h, nd)
                        \cup (IF ev \in {"RecvDREQ", "RecvLAP"} THEN Answered(n, conn[n][h], m, nd) ELSE {})
                        \cup (IF ev \in {"RecvREJ", "RecvREJStale"} THEN CheckRecvREJToTimeWait(conn[n][h], m, nd.conn[h].state) ELSE {}))

InNet(m, type) == m \in net /\ m.type = type

\* Passive REQ processing, in the order of 12.9.8: duplicate, stale,
\* listener, then the engine's bounds.
DupREQ(n, m)   == {e \in ridTable[n] : e[1] = m.src /\ e[2] = m.lid}
StaleREQ(n, m) == IF StaleCheck THEN {e \in qpnTable[n] : e[1] = m.src /\ e[2] = m.qpn} ELSE {}
NewREQ(n, m)   == DupREQ(n, m) = {} /\ StaleREQ(n, m) = {}

\* Each receive action is InNet /\ <body at the receiver>: a conjunction at
\* the top, so TLC labels its steps with the action's name.
REQAt(n, m) ==
    /\ StaleREQ(n, m) = {} \/ DupREQ(n, m) # {}
    /\ DupREQ(n, m) # {} \/ (Listener(n, m.sid) # 0 /\ Room(n, m.src))
    /\ IF DupREQ(n, m) # {}
       THEN LET h  == (CHOOSE e \in DupREQ(n, m) : TRUE)[3]
                nd == Do(NodeView(n), n, h, conn[n][h], "RecvREQ", 0, m)
            IN /\ Commit(n, nd, {m})
               /\ UNCHANGED nextLid
               /\ broken' = broken \cup Crossed(conn[n][h], m) \cup Answered(n, conn[n][h], m, nd)
       ELSE /\ CanAlloc(n)   \* the model's bound on comm IDs prunes; the engine's never runs out
            /\ LET h == Min(FreeHandles(n))
                   c == [IdleConn EXCEPT !.lid = nextLid[n], !.rnode = m.src, !.rid = m.lid, !.rqpn = m.qpn,
                                         !.sid = m.sid, !.maxr = m.retries, !.alt = m.alt, !.rinc = m.inc]
               IN Commit(n, Do(NodeView(n), n, h, c, "RecvREQ", 0, m), {m})
            /\ nextLid' = [nextLid EXCEPT ![n] = @ + 1]
            /\ UNCHANGED broken
    /\ UNCHANGED <<inc, bogusStale>>

RecvREQMsg(m) == InNet(m, "REQ") /\ REQAt(m.dst, m)

\* Beyond a bound: REJ 3 (no resources) before an id exists, as the engine
\* does; silently dropping the REQ was Linux bug 2, unless the node is
\* configured to drop it (DropExcessREQ: the active side retries).
REQRefusedAt(n, m) ==
    LET nd == Reply(NodeView(n), n, m, "RecvREQRefused", 3) IN
    /\ NewREQ(n, m) /\ Listener(n, m.sid) # 0 /\ ~Room(n, m.src)
    /\ ~DropExcessREQ
    /\ Commit(n, nd, {m})
    /\ UNCHANGED <<nextLid, inc, bogusStale>>
    /\ broken' = broken \cup RejectIs(nd, m, "REJ", 3)

RecvREQRefusedMsg(m) == InNet(m, "REQ") /\ REQRefusedAt(m.dst, m)

REQDroppedAt(n, m) ==
    /\ NewREQ(n, m) /\ Listener(n, m.sid) # 0 /\ ~Room(n, m.src)
    /\ DropExcessREQ
    /\ Commit(n, NodeView(n), {m})
    /\ UNCHANGED <<nextLid, inc, bogusStale, broken>>

RecvREQDroppedMsg(m) == InNet(m, "REQ") /\ REQDroppedAt(m.dst, m)

\* A cell with StaleOther raises Stale on the connected id the input showed
\* stale (12.9.8.3.1: DREQ the old connection into TimeWait).
StaleStep(nd, n, t, old) == IF "StaleOther" \in t.effects THEN Do(nd, n, old, conn[n][old], "Stale", 0, NoMsg) ELSE nd

\* 12.9.8.3.1: REJ(10) the REQ, then DREQ the old connection into TimeWait.
REQStaleAt(n, m) ==
    LET old == (CHOOSE e \in StaleREQ(n, m) : TRUE)[3]
        nd  == StaleStep(Reply(NodeView(n), n, m, "RecvREQStale", 0), n, Table["IDLE"]["RecvREQStale"], old)
    IN /\ DupREQ(n, m) = {}
       /\ StaleREQ(n, m) # {}
       /\ Commit(n, nd, {m})
       /\ UNCHANGED <<nextLid, inc>>
       /\ bogusStale' = (bogusStale \/ ~ConnectedMatch(n, m.src, m.qpn))
       /\ broken' = broken \cup TearsDown(n, m.src, m.qpn, nd, 0) \cup RejectIs(nd, m, "REJ", 10)
                  \cup CheckStaleToTimeWait(n, m.src, m.qpn, nd, 0) \cup CheckStaleTellsPeer(n, m.src, m.qpn, nd, 0)

RecvREQStaleMsg(m) == InNet(m, "REQ") /\ REQStaleAt(m.dst, m)

REQUnlistedAt(n, m) ==
    LET nd == Reply(NodeView(n), n, m, "RecvREQUnlisted", 0) IN
    /\ NewREQ(n, m)
    /\ Listener(n, m.sid) = 0
    /\ Commit(n, nd, {m})
    /\ UNCHANGED <<nextLid, inc, bogusStale>>
    /\ broken' = broken \cup RejectIs(nd, m, "REJ", 8)

RecvREQUnlistedMsg(m) == InNet(m, "REQ") /\ REQUnlistedAt(m.dst, m)

\* A REP whose QPN another connected id already holds is stale (12.9.8.3.1).
StaleREP(n, m, h) ==
    IF StaleCheck /\ h # 0 /\ conn[n][h].state \in LearnsREPStates
    THEN {e \in qpnTable[n] : e[1] = m.src /\ e[2] = m.qpn /\ e[3] # h} ELSE {}

\* The id learns the peer's fields from the REP that answers its REQ.
RepView(n, m, h) == [conn[n][h] EXCEPT !.rnode = m.src, !.rid = m.lid, !.rqpn = m.qpn, !.rinc = m.inc]

REPAt(n, m, h) ==
    /\ h = 0 \/ StaleREP(n, m, h) = {}
    /\ IF h = 0 THEN Deliver(n, m, "RecvREP")
       ELSE LET learns == conn[n][h].state \in LearnsREPStates
                c  == IF learns THEN RepView(n, m, h) ELSE conn[n][h]
                nd == Do(NodeView(n), n, h, c, "RecvREP", 0, m)
            IN /\ Commit(n, nd, {m})
               /\ UNCHANGED <<nextLid, inc, bogusStale>>
               /\ broken' = broken \cup Ignored(n, h, m, "RecvREP", nd)
                          \cup (IF learns THEN {} ELSE Crossed(conn[n][h], m) \cup Answered(n, conn[n][h], m, nd))

RecvREPMsg(m) == InNet(m, "REP") /\ REPAt(m.dst, m, Target(m.dst, m))

REPStaleAt(n, m, h) ==
    LET old == (CHOOSE e \in StaleREP(n, m, h) : TRUE)[3]
        nd  == StaleStep(Do(NodeView(n), n, h, RepView(n, m, h), "RecvREPStale", 0, m), n,
                         Table[conn[n][h].state]["RecvREPStale"], old)
    IN /\ h # 0 /\ StaleREP(n, m, h) # {}
       /\ Commit(n, nd, {m})
       /\ UNCHANGED <<nextLid, inc>>
       /\ bogusStale' = (bogusStale \/ ~ConnectedMatch(n, m.src, m.qpn))
       /\ broken' = broken \cup TearsDown(n, m.src, m.qpn, nd, h) \cup CheckRecvREPStaleRejects(n, h, m, nd)
                  \cup CheckStaleToTimeWait(n, m.src, m.qpn, nd, h) \cup CheckStaleTellsPeer(n, m.src, m.qpn, nd, h)

RecvREPStaleMsg(m) == InNet(m, "REP") /\ REPStaleAt(m.dst, m, Target(m.dst, m))

MRAEvent(m) == CASE m.what = 0 -> "RecvMRAForREQ" [] m.what = 1 -> "RecvMRAForREP" [] OTHER -> "RecvMRAForLAP"
RecvMRAMsg(m) == InNet(m, "MRA") /\ Deliver(m.dst, m, MRAEvent(m))
RecvREJMsg(m) == InNet(m, "REJ") /\ m.info # 10 /\ Deliver(m.dst, m, "RecvREJ")
RecvREJStaleMsg(m) == InNet(m, "REJ") /\ m.info = 10 /\ Deliver(m.dst, m, "RecvREJStale")
RecvRTUMsg(m) == InNet(m, "RTU") /\ Deliver(m.dst, m, "RecvRTU")
RecvDREPMsg(m) == InNet(m, "DREP") /\ Deliver(m.dst, m, "RecvDREP")
RecvLAPMsg(m) == InNet(m, "LAP") /\ Deliver(m.dst, m, "RecvLAP")
RecvAPRMsg(m) == InNet(m, "APR") /\ m.info = 0 /\ Deliver(m.dst, m, "RecvAPR")
RecvAPRRejectedMsg(m) == InNet(m, "APR") /\ m.info # 0 /\ Deliver(m.dst, m, "RecvAPRRejected")

\* A DREQ naming another QPN than its id's is not for it (12.9.8.4).
OtherQPN(n, m, h) == h # 0 /\ conn[n][h].qpn # m.qpn

RecvDREQMsg(m) == InNet(m, "DREQ") /\ ~OtherQPN(m.dst, m, Target(m.dst, m)) /\ Deliver(m.dst, m, "RecvDREQ")
RecvDREQOtherQPNMsg(m) == InNet(m, "DREQ") /\ OtherQPN(m.dst, m, Target(m.dst, m)) /\ Deliver(m.dst, m, "RecvDREQOtherQPN")

\* SIDR: a SIDR_REQ is a duplicate when the SIDR table has its request ID
\* from its sender; a new one goes to the listener, which must have room; a
\* SIDR_REP goes to the id its request ID names.
DupSIDR(n, m) == {e \in sidrTable[n] : e[1] = m.src /\ e[2] = m.lid}

SIDRREQAt(n, m) ==
    /\ DupSIDR(n, m) # {} \/ (Listener(n, m.sid) # 0 /\ FreeHandles(n) # {} /\ CanAlloc(n))
    /\ IF DupSIDR(n, m) # {}
       THEN LET h == (CHOOSE e \in DupSIDR(n, m) : TRUE)[3]
            IN Commit(n, Do(NodeView(n), n, h, conn[n][h], "RecvSIDRREQ", 0, m), {m}) /\ UNCHANGED nextLid
       ELSE /\ LET h == Min(FreeHandles(n))
                   c == [IdleConn EXCEPT !.lid = nextLid[n], !.rnode = m.src, !.rid = m.lid, !.sid = m.sid, !.rinc = m.inc]
               IN Commit(n, Do(NodeView(n), n, h, c, "RecvSIDRREQ", 0, m), {m})
            /\ nextLid' = [nextLid EXCEPT ![n] = @ + 1]
    /\ UNCHANGED <<inc, bogusStale, broken>>

RecvSIDRREQMsg(m) == InNet(m, "SIDR_REQ") /\ SIDRREQAt(m.dst, m)

SIDRUnlistedAt(n, m) ==
    LET nd == Reply(NodeView(n), n, m, "RecvSIDRREQUnlisted", 0) IN
    /\ DupSIDR(n, m) = {} /\ Listener(n, m.sid) = 0
    /\ Commit(n, nd, {m})
    /\ UNCHANGED <<nextLid, inc, bogusStale>>
    /\ broken' = broken \cup RejectIs(nd, m, "SIDR_REP", 1)

RecvSIDRREQUnlistedMsg(m) == InNet(m, "SIDR_REQ") /\ SIDRUnlistedAt(m.dst, m)

\* At MaxIDs the engine drops a new SIDR_REQ (the requester retries).
SIDRDroppedAt(n, m) ==
    /\ DupSIDR(n, m) = {} /\ Listener(n, m.sid) # 0 /\ FreeHandles(n) = {}
    /\ Commit(n, NodeView(n), {m})
    /\ UNCHANGED <<nextLid, inc, bogusStale, broken>>

RecvSIDRREQDroppedMsg(m) == InNet(m, "SIDR_REQ") /\ SIDRDroppedAt(m.dst, m)

SIDRTarget(n, m) ==
    LET hs == {h \in Handles : conn[n][h].state \in ReplyStates /\ m.rid # 0 /\ conn[n][h].lid = m.rid}
    IN IF hs = {} THEN 0 ELSE Min(hs)

SIDRREPAt(n, m) ==
    LET h  == SIDRTarget(n, m)
        nd == IF h = 0 THEN Reply(NodeView(n), n, m, "RecvSIDRREP", 0) ELSE Do(NodeView(n), n, h, conn[n][h], "RecvSIDRREP", 0, m)
    IN /\ Commit(n, nd, {m})
       /\ UNCHANGED <<nextLid, inc, bogusStale>>
       /\ broken' = broken \cup Ignored(n, h, m, "RecvSIDRREP", nd)

RecvSIDRREPMsg(m) == InNet(m, "SIDR_REP") /\ SIDRREPAt(m.dst, m)

\* Get(ClassPortInfo) names no id: the IDLE row answers it with a GetResp,
\* which the querier's CM refuses (a response, not for the CM).
ClassPortInfoAt(n, m) ==
    /\ Commit(n, Reply(NodeView(n), n, m, "RecvClassPortInfoGet", 0), {m})
    /\ UNCHANGED <<nextLid, inc, bogusStale, broken>>

RecvClassPortInfoGetMsg(m) == InNet(m, "GET") /\ ClassPortInfoAt(m.dst, m)
RecvGetRespMsg(m) == InNet(m, "GETRESP") /\ Commit(m.dst, NodeView(m.dst), {m}) /\ UNCHANGED <<nextLid, inc, bogusStale, broken>>

-----------------------------------------------------------------------------
(* The environment.                                                         *)

LoseMsg(m) == Loss /\ m \in net /\ net' = net \ {m}
              /\ UNCHANGED <<conn, ridTable, qpnTable, lsnTable, sidrTable, nextLid, inc, crashes, bogusStale, broken>>

\* A peer asks node r for its ClassPortInfo.
QueryPortInfo(n, r) == PortInfo /\ n # r /\ net' = net \cup {Msg0("GET", n, r)}
              /\ UNCHANGED <<conn, ridTable, qpnTable, lsnTable, sidrTable, nextLid, inc, crashes, bogusStale, broken>>

\* A crash loses all CM state; the peers keep theirs, which is how stale
\* connections arise. QPs are gone too, so their numbers come back, and a
\* server's application listens again. The engine's allocator restarts from
\* a random point drawn at construction: the model keeps "where it was", so
\* new IDs differ from the old ones (any start that avoids them behaves the
\* same). FreshCommIDs = FALSE is a CM that restarts its sequence instead.
CrashNode(n) ==
    /\ crashes < MaxCrashes
    /\ conn' = [conn EXCEPT ![n] = InitConn(n)]
    /\ ridTable' = [ridTable EXCEPT ![n] = {}]
    /\ qpnTable' = [qpnTable EXCEPT ![n] = {}]
    /\ lsnTable' = [lsnTable EXCEPT ![n] = InitListens(n)]
    /\ sidrTable' = [sidrTable EXCEPT ![n] = {}]
    /\ net' = {m \in net : m.dst # n}
    /\ crashes' = crashes + 1
    /\ inc' = [inc EXCEPT ![n] = @ + 1]
    /\ nextLid' = IF FreshCommIDs THEN nextLid ELSE [nextLid EXCEPT ![n] = 1]
    /\ UNCHANGED <<bogusStale, broken>>

\* A node with nothing to lose but its messages: the crash only loses those,
\* which Lose does; the model skips it (unless it resets the allocator).
Crash(n) == (conn[n] # InitConn(n) \/ (~FreshCommIDs /\ nextLid[n] # 1)) /\ CrashNode(n)

\* One action per receive event: TLC names a step after the operator around
\* an \E over the (state-dependent) network, so each gets its own.
RecvREQ == \E m \in net : RecvREQMsg(m)
RecvREQRefused == \E m \in net : RecvREQRefusedMsg(m)
RecvREQDropped == \E m \in net : RecvREQDroppedMsg(m)
RecvREQStale == \E m \in net : RecvREQStaleMsg(m)
RecvREQUnlisted == \E m \in net : RecvREQUnlistedMsg(m)
RecvREP == \E m \in net : RecvREPMsg(m)
RecvREPStale == \E m \in net : RecvREPStaleMsg(m)
RecvMRA == \E m \in net : RecvMRAMsg(m)
RecvREJ == \E m \in net : RecvREJMsg(m)
RecvREJStale == \E m \in net : RecvREJStaleMsg(m)
RecvRTU == \E m \in net : RecvRTUMsg(m)
RecvDREP == \E m \in net : RecvDREPMsg(m)
RecvDREQ == \E m \in net : RecvDREQMsg(m)
RecvDREQOtherQPN == \E m \in net : RecvDREQOtherQPNMsg(m)
RecvLAP == \E m \in net : RecvLAPMsg(m)
RecvAPR == \E m \in net : RecvAPRMsg(m)
RecvAPRRejected == \E m \in net : RecvAPRRejectedMsg(m)
RecvSIDRREQ == \E m \in net : RecvSIDRREQMsg(m)
RecvSIDRREQUnlisted == \E m \in net : RecvSIDRREQUnlistedMsg(m)
RecvSIDRREQDropped == \E m \in net : RecvSIDRREQDroppedMsg(m)
RecvSIDRREP == \E m \in net : RecvSIDRREPMsg(m)
RecvClassPortInfoGet == \E m \in net : RecvClassPortInfoGetMsg(m)
RecvGetResp == \E m \in net : RecvGetRespMsg(m)
Lose == \E m \in net : LoseMsg(m)

Next ==
    \/ \E n \in Nodes, h \in Handles :
          \/ Accept(n, h) \/ SendMRA(n, h) \/ SendRTU(n, h) \/ Reject(n, h)
          \/ Disconnect(n, h) \/ SendDREP(n, h) \/ CommEst(n, h) \/ Destroy(n, h)
          \/ LoadAltPath(n, h) \/ AnswerLAP(n, h) \/ RejectLAP(n, h) \/ SIDRReply(n, h)
          \/ Timeout(n, h) \/ TimeoutFinal(n, h) \/ TimeWaitExpiry(n, h)
    \/ \E n \in Nodes : Connect(n)
    \/ \E n \in Nodes : Listen(n)
    \/ \E n \in Nodes : SIDRRequest(n)
    \/ RecvREQ \/ RecvREQStale \/ RecvREQUnlisted \/ RecvREQRefused \/ RecvREQDropped \/ RecvREP \/ RecvREPStale
    \/ RecvMRA \/ RecvREJ \/ RecvREJStale \/ RecvRTU \/ RecvDREQ \/ RecvDREQOtherQPN \/ RecvDREP
    \/ RecvLAP \/ RecvAPR \/ RecvAPRRejected
    \/ RecvSIDRREQ \/ RecvSIDRREQUnlisted \/ RecvSIDRREQDropped \/ RecvSIDRREP
    \/ RecvClassPortInfoGet \/ RecvGetResp \/ Lose
    \/ \E n, r \in Nodes : QueryPortInfo(n, r)
    \/ \E n \in Nodes : Crash(n)

\* The application answers (an alternate path and a SIDR request too, where
\* the config has them), timers fire, TimeWait ends.
Fairness ==
    /\ \A n \in Nodes, h \in Handles :
          /\ WF_vars(Accept(n, h)) /\ WF_vars(SendRTU(n, h)) /\ WF_vars(SendDREP(n, h))
          /\ WF_vars(Timeout(n, h)) /\ WF_vars(TimeoutFinal(n, h)) /\ WF_vars(TimeWaitExpiry(n, h))
    /\ IF LAP THEN \A n \in Nodes, h \in Handles : WF_vars(AnswerLAP(n, h)) ELSE TRUE
    /\ IF SIDRClients # {} THEN \A n \in Nodes, h \in Handles : WF_vars(SIDRReplyWith(n, h, 0)) ELSE TRUE

Spec == Init /\ [][Next]_vars
LiveSpec == Spec /\ Fairness

\* Only the timers are fair: the application may never answer a REQ (a
\* listener that never accepts) and no message need arrive.
TimerFairness ==
    \A n \in Nodes, h \in Handles :
        WF_vars(Timeout(n, h)) /\ WF_vars(TimeoutFinal(n, h)) /\ WF_vars(TimeWaitExpiry(n, h))
SilentSpec == Spec /\ TimerFairness

NetBound == Cardinality(net) <= MaxNet

\* Every behaviour up to MaxDepth steps: TLC searches breadth first, so this
\* checks all of them exhaustively and stops where the space gets too wide.
DepthBound == MaxDepth = 0 \/ TLCGet("level") <= MaxDepth

-----------------------------------------------------------------------------
(* Invariants. pbt/ implements each in Go under the same name.              *)

\* A REJ(10) goes out only for a REQ or REP whose (remote CA GUID, remote QPN)
\* matches an id that is still connected; a TimeWait match alone never does.
NoBogusStaleReject == ~bogusStale

\* No node holds two connected ids for the same remote (CA GUID, QPN).
StaleDetected ==
    \A n \in Nodes, h1, h2 \in Handles :
        (h1 # h2 /\ conn[n][h1].state \in ConnectedStates /\ conn[n][h2].state \in ConnectedStates)
            => <<conn[n][h1].rnode, conn[n][h1].rqpn>> # <<conn[n][h2].rnode, conn[n][h2].rqpn>>

\* A table entry exists exactly when its owner is in a state that tracks it.
TablesMatchStates ==
    \A n \in Nodes :
        /\ \A e \in ridTable[n] : e[1] = conn[n][e[3]].rnode /\ e[2] = conn[n][e[3]].rid
        /\ \A e \in qpnTable[n] : e[1] = conn[n][e[3]].rnode /\ e[2] = conn[n][e[3]].rqpn
        /\ \A e \in lsnTable[n] : e[1] = conn[n][e[3]].sid /\ e[2] = conn[n][e[3]].mask
        /\ \A e \in sidrTable[n] : e[1] = conn[n][e[3]].rnode /\ e[2] = conn[n][e[3]].rid
        /\ \A h \in Handles :
              /\ (conn[n][h].state \in RemoteIDStates) = (\E e \in ridTable[n] : e[3] = h)
              /\ (conn[n][h].state \in ListenStates) = (\E e \in lsnTable[n] : e[3] = h)
              /\ (conn[n][h].state \in SIDRStates) = (\E e \in sidrTable[n] : e[3] = h)
              /\ (conn[n][h].state \notin LAPHostStates) => conn[n][h].lap = LAPOff
              /\ LET has == \E e \in qpnTable[n] : e[3] = h IN
                 \* Legacy: a TimeWait id keeps the entry it had when connected.
                 IF LegacyTimeWaitQPN /\ conn[n][h].state \in TimeWaitStates THEN TRUE
                 ELSE (conn[n][h].state \in ConnectedStates) = has

\* A local comm ID is never reused before TimeWait exit (a listen's is never
\* on the wire: the model gives it none).
UniqueLocalCommID ==
    \A n \in Nodes, h1, h2 \in Handles :
        (h1 # h2 /\ conn[n][h1].state \in HoldStates \ ListenStates /\ conn[n][h2].state \in HoldStates \ ListenStates)
            => conn[n][h1].lid # conn[n][h2].lid

\* Two ESTABLISHED ends that name each other agree on comm IDs and QPNs.
EstablishedAgree ==
    \A a, b \in Nodes, x, y \in Handles :
        LET cx == conn[a][x]  cy == conn[b][y] IN
        (cx.state = "ESTABLISHED" /\ cy.state = "ESTABLISHED" /\ a # b
         /\ cx.rnode = b /\ cx.rid = cy.lid /\ cy.rnode = a /\ cy.rid = cx.lid)
            => cx.rqpn = cy.qpn /\ cy.rqpn = cx.qpn

\* The engine's bounds hold: no node has more half-open ids (passive, not
\* yet established; the states are named here, not taken from the
\* definition) than MaxHalfOpen, nor more of one peer than
\* MaxHalfOpenPerPeer.
HalfOpenBounded ==
    LET half(n, r) == Cardinality({h \in Handles : conn[n][h].state \in {"REQ_RCVD", "MRA_REQ_SENT", "REP_SENT", "MRA_REP_RCVD"}
                                                   /\ (r = 0 \/ conn[n][h].rnode = r)})
    IN \A n \in Nodes : half(n, 0) <= MaxHalfOpen /\ \A r \in Nodes : half(n, r) <= MaxHalfOpenPerPeer

(* The obligations (see "The obligations" above).                           *)
StaleTearsDown == "StaleTearsDown" \notin broken
DuplicateAnswered == "DuplicateAnswered" \notin broken
IgnoredChangesNothing == "IgnoredChangesNothing" \notin broken
RejectJustified == "RejectJustified" \notin broken
AltPathAgreed == "AltPathAgreed" \notin broken
NoCrossIncarnation == "NoCrossIncarnation" \notin broken
StaleToTimeWait == "StaleToTimeWait" \notin broken
StaleTellsPeer == "StaleTellsPeer" \notin broken
RecvREPStaleRejects == "RecvREPStaleRejects" \notin broken
RecvREJToTimeWait == "RecvREJToTimeWait" \notin broken
RejectToTimeWait == "RejectToTimeWait" \notin broken

\* An id that was ESTABLISHED reaches IDLE only through TIMEWAIT, or a
\* crash: once established (or disconnecting, which an established id or a
\* passive one whose RTU was lost does), it is on its way there.
Disconnecting == {"ESTABLISHED", "DREQ_SENT", "DREQ_RCVD"}
LeavesThroughTimeWait ==
    [][\A n \in Nodes, h \in Handles :
         conn[n][h].state \in Disconnecting
            => conn'[n][h].state \in Disconnecting \cup {"TIMEWAIT"} \/ inc'[n] # inc[n]]_vars

\* A witness, not a property: no REJ 10 rejecting a REP is ever sent.
\* cm_stale_witness.cfg must find it violated, which shows that
\* cm_stale.cfg reaches a stale REP (RecvREPStale) and the obligations of
\* that path are not checked vacuously there.
NoStaleREP == ~\E m \in net : m.type = "REJ" /\ m.info = 10 /\ m.what = 1

(* Liveness under Fairness (AttemptStates is the definition's).            *)
AttemptsEnd == \A n \in Nodes, h \in Handles :
    conn[n][h].state \in AttemptStates ~> conn[n][h].state \in {"ESTABLISHED", "IDLE"}

TimeWaitEnds == \A n \in Nodes, h \in Handles :
    conn[n][h].state = "TIMEWAIT" ~> conn[n][h].state = "IDLE"

\* The obligation HalfOpenEnds under SilentSpec (the states are named here,
\* not taken from the definition): a half-open id leaves the half-open
\* states by its timers alone, however silent its peer and its
\* application, so that no REQ holds a MaxHalfOpen slot for ever.
HalfOpenNamed == {"REQ_RCVD", "MRA_REQ_SENT", "REP_SENT", "MRA_REP_RCVD"}
HalfOpenEnds == \A n \in Nodes, h \in Handles :
    conn[n][h].state \in HalfOpenNamed ~> conn[n][h].state \notin HalfOpenNamed

=============================================================================
