---------------------------------- MODULE cm ----------------------------------
(***************************************************************************)
(* The InfiniBand Communication Manager (IBTA Vol 1 ch. 12): N CM nodes    *)
(* exchanging REQ/MRA/REP/RTU/REJ/DREQ/DREP over a network that loses,     *)
(* duplicates and reorders, with timeouts, retries, TimeWait and crashes.  *)
(*                                                                         *)
(* Every per-connection step goes through Table (module CMTable), which    *)
(* gen/ emits from the same definition as the Go engine's table. This     *)
(* module adds what the table cannot say: how a received message finds     *)
(* its id (the remote-ID and remote-QPN tables), which is where the        *)
(* TimeWait stale-connection bug lived.                                    *)
(*                                                                         *)
(* Action names are the engine's event names (cm.Event.String()).          *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets, TLC, CMTable

CONSTANTS
    Nodes,              \* CM nodes; a node's CA GUID is the node itself
    Clients,            \* nodes whose applications call Connect (to any other node)
    Servers,            \* nodes with a listener on the service ID
    Handles,            \* id slots per node
    MaxCommID,          \* local comm IDs 1..MaxCommID per node (0 means "none")
    QPNs,               \* local QP numbers per node (0 means "none")
    MaxRetries,         \* Max CM Retries of every message
    MaxCrashes,         \* crash/restart budget
    MaxNet,             \* messages in flight (state constraint)
    Loss,               \* the network may lose a message
    Duplicate,          \* the network may deliver a message twice
    LegacyTimeWaitQPN,  \* pre-fix Linux: the remote QPN stays in its table during TimeWait
    StaleCheck,         \* passive stale-connection detection (12.4.1) is on
    MaxDepth            \* bound on behaviour length for breadth-first search; 0: none

VARIABLES
    conn,       \* conn[n][h]: the id in slot h of node n
    ridTable,   \* ridTable[n]: remote-ID table, <<remote node, remote comm ID, handle>>
    qpnTable,   \* qpnTable[n]: remote-QPN table, <<remote node, remote QPN, handle>>
    net,        \* messages in flight; a set, so order is free
    nextLid,    \* nextLid[n]: the comm ID allocator's cursor
    crashes,    \* crashes so far
    bogusStale  \* history: a REJ(10) went out with no connected id matching

vars == <<conn, ridTable, qpnTable, net, nextLid, crashes, bogusStale>>

CommIDs == 1..MaxCommID

Conn == [state : States, lid : CommIDs \cup {0}, qpn : QPNs \cup {0},
         rnode : Nodes \cup {0}, rid : CommIDs \cup {0}, rqpn : QPNs \cup {0},
         retries : 0..MaxRetries]

IdleConn == [state |-> "IDLE", lid |-> 0, qpn |-> 0, rnode |-> 0, rid |-> 0, rqpn |-> 0, retries |-> 0]

\* One message. lid is the sender's comm ID, rid the receiver's (0 when not
\* yet known), qpn the sender's QPN (REQ, REP) or the receiver's (DREQ), info
\* the REJ reason or the message MRAed (0 REQ, 1 REP, as on the wire). A REJ
\* carries 10 (stale) or 0 (any other reason): the receiver's table tells
\* only those two apart, and merging the rest keeps the state space small.
Message == [type : {"REQ", "MRA", "REJ", "REP", "RTU", "DREQ", "DREP"},
            src : Nodes, dst : Nodes, lid : CommIDs \cup {0}, rid : CommIDs \cup {0},
            qpn : QPNs \cup {0}, info : {0, 1, 10}]

TypeOK ==
    /\ conn \in [Nodes -> [Handles -> Conn]]
    /\ ridTable \in [Nodes -> SUBSET (Nodes \X CommIDs \X Handles)]
    /\ qpnTable \in [Nodes -> SUBSET (Nodes \X QPNs \X Handles)]
    /\ net \subseteq Message
    /\ nextLid \in [Nodes -> 1..(MaxCommID + 1)]
    /\ crashes \in 0..MaxCrashes
    /\ bogusStale \in BOOLEAN

Init ==
    /\ conn = [n \in Nodes |-> [h \in Handles |-> IdleConn]]
    /\ ridTable = [n \in Nodes |-> {}]
    /\ qpnTable = [n \in Nodes |-> {}]
    /\ net = {}
    /\ nextLid = [n \in Nodes |-> 1]
    /\ crashes = 0
    /\ bogusStale = FALSE

-----------------------------------------------------------------------------
(* Helpers.                                                                 *)

Min(S) == CHOOSE x \in S : \A y \in S : x <= y

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

FreeHandles(n) == {h \in Handles : conn[n][h].state = "IDLE"}

\* The oracle, outside the tables: does node n hold a *connected* id for (r, q)?
ConnectedMatch(n, r, q) ==
    \E h \in Handles : conn[n][h].state \in ConnectedStates /\ conn[n][h].rnode = r /\ conn[n][h].rqpn = q


-----------------------------------------------------------------------------
(* One table step. A node view nd = [conn, rid, qpn, out] is threaded      *)
(* through the steps of one action, so one input can move two ids (a stale *)
(* REQ moves the old id) and still commit atomically.                      *)

NodeView(n) == [conn |-> conn[n], rid |-> ridTable[n], qpn |-> qpnTable[n], out |-> {}]

Mk(type, src, dst, lid, rid, qpn, info) ==
    [type |-> type, src |-> src, dst |-> dst, lid |-> lid, rid |-> rid, qpn |-> qpn, info |-> info]

\* The message entry t sends for id c of node n (Resend rebuilds the same copy).
Out(n, c, t, reason) ==
    LET rej == IF (IF t.reason # 0 THEN t.reason ELSE reason) = 10 THEN 10 ELSE 0
    IN CASE t.send = "NONE" -> {}
         [] t.send = "REQ"  -> {Mk("REQ", n, c.rnode, c.lid, 0, c.qpn, 0)}
         [] t.send = "REP"  -> {Mk("REP", n, c.rnode, c.lid, c.rid, c.qpn, 0)}
         [] t.send = "RTU"  -> {Mk("RTU", n, c.rnode, c.lid, c.rid, 0, 0)}
         [] t.send = "MRA"  -> {Mk("MRA", n, c.rnode, c.lid, c.rid, 0, IF t.about = "REQ" THEN 0 ELSE 1)}
         \* A REJ from a state whose comm ID the peer never heard names none.
         [] t.send = "REJ"  -> {Mk("REJ", n, c.rnode, IF c.state \in UnannouncedStates THEN 0 ELSE c.lid, c.rid, 0, rej)}
         [] t.send = "DREQ" -> {Mk("DREQ", n, c.rnode, c.lid, c.rid, c.rqpn, 0)}
         [] t.send = "DREP" -> {Mk("DREP", n, c.rnode, c.lid, c.rid, 0, 0)}

\* The states whose timer counts retries of a main-line message. A state
\* that runs the alternate-path sub-state times a LAP, which the model leaves
\* out.
RetryStates == TimerStates \ LAPHostStates

After(c, t, ev) ==
    IF "Free" \in t.effects THEN IdleConn
    ELSE [c EXCEPT !.state = t.next,
                   !.retries = CASE t.next \notin RetryStates -> 0   \* no timer: nothing to count
                                 [] "StartTimer" \in t.effects -> MaxRetries
                                 [] "Retry" \in t.effects -> c.retries - 1
                                 [] OTHER -> c.retries]

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

\* Apply event ev to id h of node n, whose record (with any fields the input
\* sets) is c. Drop and Invalid cells leave everything as it was.
Do(nd, n, h, c, ev, reason) ==
    LET t == Table[c.state][ev]
    IN IF t.kind = "Transition"
       THEN [conn |-> [nd.conn EXCEPT ![h] = After(c, t, ev)],
             rid  |-> RIDAfter(h, c, t, nd.rid),
             qpn  |-> QPNAfter(h, c, t, nd.qpn),
             out  |-> nd.out \cup Out(n, c, t, reason)]
       ELSE nd

\* A message that matches no id takes the IDLE row: a stateless answer built
\* from the message itself, or nothing.
Reply(nd, n, m, ev) ==
    LET t == Table["IDLE"][ev]
    IN IF t.kind = "Stateless"
       THEN [nd EXCEPT !.out = @ \cup
               CASE t.send = "REJ"  -> {Mk("REJ", n, m.src, 0, m.lid, 0, IF t.reason = 10 THEN 10 ELSE 0)}
                 [] t.send = "DREP" -> {Mk("DREP", n, m.src, m.rid, m.lid, 0, 0)}]
       ELSE nd

\* Commit a node view. The input messages in consumed leave the network,
\* unless the network duplicates them (keeps a copy to deliver again).
Commit(n, nd, consumed) ==
    /\ conn' = [conn EXCEPT ![n] = nd.conn]
    /\ ridTable' = [ridTable EXCEPT ![n] = nd.rid]
    /\ qpnTable' = [qpnTable EXCEPT ![n] = nd.qpn]
    /\ \E keep \in (IF Duplicate /\ consumed # {} THEN BOOLEAN ELSE {FALSE}) :
          net' = (IF keep THEN net ELSE net \ consumed) \cup nd.out
    /\ crashes' = crashes

-----------------------------------------------------------------------------
(* Application calls.                                                       *)

\* ConnectWith and AcceptWith take the QPN the application chose; the model
\* checks the lowest free one (QPNs are interchangeable), trace validation
\* (Tracecm.tla) the one the engine's trace names.
ConnectWith(n, h, r, q) ==
    /\ n \in Clients
    /\ r \in Nodes \ {n}   \* a node that does not listen answers REJ 8
    /\ conn[n][h].state = "IDLE"
    /\ CanAlloc(n)
    /\ q \in FreeQPNs(n)
    /\ LET c == [IdleConn EXCEPT !.lid = nextLid[n], !.qpn = q, !.rnode = r]
       IN Commit(n, Do(NodeView(n), n, h, c, "Connect", 0), {})
    /\ nextLid' = [nextLid EXCEPT ![n] = @ + 1]
    /\ UNCHANGED bogusStale

Connect(n, h) == FreeQPNs(n) # {} /\ \E r \in Nodes \ {n} : ConnectWith(n, h, r, Min(FreeQPNs(n)))

\* The calls that need nothing but the id: enabled where the table has a step.
AppCall(n, h, ev, reason) ==
    /\ Table[conn[n][h].state][ev].kind = "Transition"
    /\ Commit(n, Do(NodeView(n), n, h, conn[n][h], ev, reason), {})
    /\ UNCHANGED <<nextLid, bogusStale>>

\* The passive side's QP comes with the REP: the application creates it when
\* it accepts (the REP carries its QPN), not when the REQ arrives.
AcceptWith(n, h, q) ==
    /\ Table[conn[n][h].state]["Accept"].kind = "Transition"
    /\ q \in FreeQPNs(n)
    /\ Commit(n, Do(NodeView(n), n, h, [conn[n][h] EXCEPT !.qpn = q], "Accept", 0), {})
    /\ UNCHANGED <<nextLid, bogusStale>>

\* Each action is a conjunction at its top, so TLC labels its steps with the
\* action's name (-dump dot,actionlabels); no call applies to an IDLE slot.
Accept(n, h)     == FreeQPNs(n) # {} /\ AcceptWith(n, h, Min(FreeQPNs(n)))
SendMRA(n, h)    == conn[n][h].state # "IDLE" /\ AppCall(n, h, "SendMRA", 0)
SendRTU(n, h)    == conn[n][h].state # "IDLE" /\ AppCall(n, h, "SendRTU", 0)
Reject(n, h)     == conn[n][h].state # "IDLE" /\ AppCall(n, h, "Reject", 28)
Disconnect(n, h) == conn[n][h].state # "IDLE" /\ AppCall(n, h, "Disconnect", 0)
SendDREP(n, h)   == conn[n][h].state # "IDLE" /\ AppCall(n, h, "SendDREP", 0)
CommEst(n, h)    == conn[n][h].state # "IDLE" /\ AppCall(n, h, "CommEst", 0)
Destroy(n, h)    == conn[n][h].state # "IDLE" /\ AppCall(n, h, "Destroy", 0)

(* Timers: nondeterministic, as the network's delay is. Which event a      *)
(* timer raises is the definition's TimerEvent.                            *)
TimerIs(n, h, ev) == TimerEvent(conn[n][h].state, conn[n][h].retries > 0) = ev
Timeout(n, h)        == TimerIs(n, h, "Timeout") /\ AppCall(n, h, "Timeout", 0)
TimeoutFinal(n, h)   == TimerIs(n, h, "TimeoutFinal") /\ AppCall(n, h, "TimeoutFinal", 0)
TimeWaitExpiry(n, h) == TimerIs(n, h, "TimeWaitExpiry") /\ AppCall(n, h, "TimeWaitExpiry", 0)

-----------------------------------------------------------------------------
(* Receiving. Each message is classified into one event for one id, as the  *)
(* engine's classifier does; the action is named after the event.          *)

\* The id a reply (MRA, REP, RTU, REJ, DREQ, DREP) is addressed to: our comm
\* ID in rid and (once known) the peer's comm ID matching, as Linux's
\* cm_acquire_id does. Only a REP carries the sender's CA GUID, which must
\* then match the peer's (once known). A REJ for a REQ we only know by the
\* peer's comm ID (rid = 0) goes through the remote-ID table.
Target(n, m) ==
    LET byLID == {h \in Handles : conn[n][h].state \in ReplyStates
                                  /\ m.rid # 0 /\ conn[n][h].lid = m.rid
                                  /\ (conn[n][h].rid = 0 \/ conn[n][h].rid = m.lid)
                                  /\ (m.type # "REP" \/ conn[n][h].rid = 0 \/ conn[n][h].rnode = m.src)}
        byRID == {e[3] : e \in {e \in ridTable[n] : m.rid = 0 /\ e[1] = m.src /\ e[2] = m.lid}}
    IN IF byLID # {} THEN Min(byLID) ELSE IF byRID # {} THEN Min(byRID) ELSE 0

\* Deliver m as event ev: to its id, or through the IDLE row when it has none.
Deliver(n, m, ev) ==
    LET h == Target(n, m)
    IN /\ Commit(n, IF h = 0 THEN Reply(NodeView(n), n, m, ev)
                             ELSE Do(NodeView(n), n, h, conn[n][h], ev, 0), {m})
       /\ UNCHANGED <<nextLid, bogusStale>>

InNet(m, type) == m \in net /\ m.type = type

\* Passive REQ processing, in the order of 12.9.8: duplicate, stale, listener.
DupREQ(n, m)   == {e \in ridTable[n] : e[1] = m.src /\ e[2] = m.lid}
StaleREQ(n, m) == IF StaleCheck THEN {e \in qpnTable[n] : e[1] = m.src /\ e[2] = m.qpn} ELSE {}

\* Each receive action is InNet /\ <body at the receiver>: a conjunction at
\* the top, so TLC labels its steps with the action's name.
REQAt(n, m) ==
    /\ StaleREQ(n, m) = {} \/ DupREQ(n, m) # {}
    /\ DupREQ(n, m) # {} \/ n \in Servers
    /\ IF DupREQ(n, m) # {}
       THEN LET h == (CHOOSE e \in DupREQ(n, m) : TRUE)[3]
            IN Commit(n, Do(NodeView(n), n, h, conn[n][h], "RecvREQ", 0), {m}) /\ UNCHANGED nextLid
       ELSE /\ FreeHandles(n) # {}
            /\ CanAlloc(n)   \* the model's bound on comm IDs prunes; the engine's never runs out
            /\ LET h == Min(FreeHandles(n))
                   c == [IdleConn EXCEPT !.lid = nextLid[n], !.rnode = m.src, !.rid = m.lid, !.rqpn = m.qpn]
               IN Commit(n, Do(NodeView(n), n, h, c, "RecvREQ", 0), {m})
            /\ nextLid' = [nextLid EXCEPT ![n] = @ + 1]
    /\ UNCHANGED bogusStale

RecvREQMsg(m) == InNet(m, "REQ") /\ REQAt(m.dst, m)

\* Out of ids: REJ 3 (no resources) before an id exists, as the engine does
\* at MaxIDs; silently dropping the REQ was Linux bug 2.
REQRefusedAt(n, m) ==
    /\ DupREQ(n, m) = {} /\ StaleREQ(n, m) = {}
    /\ n \in Servers
    /\ FreeHandles(n) = {}
    /\ Commit(n, Reply(NodeView(n), n, m, "RecvREQRefused"), {m})
    /\ UNCHANGED <<nextLid, bogusStale>>

RecvREQRefusedMsg(m) == InNet(m, "REQ") /\ REQRefusedAt(m.dst, m)

\* 12.9.8.3.1: REJ(10) the REQ, then DREQ the old connection into TimeWait.
REQStaleAt(n, m) ==
    LET old == (CHOOSE e \in StaleREQ(n, m) : TRUE)[3]
    IN /\ DupREQ(n, m) = {}
       /\ StaleREQ(n, m) # {}
       /\ Commit(n, Do(Reply(NodeView(n), n, m, "RecvREQStale"), n, old, conn[n][old], "Stale", 0), {m})
       /\ UNCHANGED nextLid
       /\ bogusStale' = (bogusStale \/ ~ConnectedMatch(n, m.src, m.qpn))

RecvREQStaleMsg(m) == InNet(m, "REQ") /\ REQStaleAt(m.dst, m)

REQUnlistedAt(n, m) ==
    /\ DupREQ(n, m) = {} /\ StaleREQ(n, m) = {}
    /\ n \notin Servers
    /\ Commit(n, Reply(NodeView(n), n, m, "RecvREQUnlisted"), {m})
    /\ UNCHANGED <<nextLid, bogusStale>>

RecvREQUnlistedMsg(m) == InNet(m, "REQ") /\ REQUnlistedAt(m.dst, m)

\* A REP whose QPN another connected id already holds is stale (12.9.8.3.1).
StaleREP(n, m, h) ==
    IF StaleCheck /\ h # 0 /\ conn[n][h].state \in LearnsREPStates
    THEN {e \in qpnTable[n] : e[1] = m.src /\ e[2] = m.qpn /\ e[3] # h} ELSE {}

RepView(n, m, h) == [conn[n][h] EXCEPT !.rnode = m.src, !.rid = m.lid, !.rqpn = m.qpn]

REPAt(n, m, h) ==
    /\ h = 0 \/ StaleREP(n, m, h) = {}
    /\ IF h = 0 THEN Deliver(n, m, "RecvREP")
       ELSE LET c == IF conn[n][h].state \in LearnsREPStates THEN RepView(n, m, h) ELSE conn[n][h]
            IN Commit(n, Do(NodeView(n), n, h, c, "RecvREP", 0), {m}) /\ UNCHANGED <<nextLid, bogusStale>>

RecvREPMsg(m) == InNet(m, "REP") /\ REPAt(m.dst, m, Target(m.dst, m))

REPStaleAt(n, m, h) ==
    LET old == (CHOOSE e \in StaleREP(n, m, h) : TRUE)[3]
    IN /\ h # 0 /\ StaleREP(n, m, h) # {}
       /\ Commit(n, Do(Do(NodeView(n), n, h, RepView(n, m, h), "RecvREPStale", 0), n, old, conn[n][old], "Stale", 0), {m})
       /\ UNCHANGED nextLid
       /\ bogusStale' = (bogusStale \/ ~ConnectedMatch(n, m.src, m.qpn))

RecvREPStaleMsg(m) == InNet(m, "REP") /\ REPStaleAt(m.dst, m, Target(m.dst, m))

RecvMRAMsg(m) == InNet(m, "MRA") /\ Deliver(m.dst, m, IF m.info = 0 THEN "RecvMRAForREQ" ELSE "RecvMRAForREP")
RecvREJMsg(m) == InNet(m, "REJ") /\ m.info # 10 /\ Deliver(m.dst, m, "RecvREJ")
RecvREJStaleMsg(m) == InNet(m, "REJ") /\ m.info = 10 /\ Deliver(m.dst, m, "RecvREJStale")
RecvRTUMsg(m) == InNet(m, "RTU") /\ Deliver(m.dst, m, "RecvRTU")
RecvDREPMsg(m) == InNet(m, "DREP") /\ Deliver(m.dst, m, "RecvDREP")

\* A DREQ naming another QPN than its id's is not for it (12.9.8.4).
OtherQPN(n, m, h) == h # 0 /\ conn[n][h].qpn # m.qpn

RecvDREQMsg(m) == InNet(m, "DREQ") /\ ~OtherQPN(m.dst, m, Target(m.dst, m)) /\ Deliver(m.dst, m, "RecvDREQ")
RecvDREQOtherQPNMsg(m) == InNet(m, "DREQ") /\ OtherQPN(m.dst, m, Target(m.dst, m)) /\ Deliver(m.dst, m, "RecvDREQOtherQPN")

-----------------------------------------------------------------------------
(* The environment.                                                         *)

LoseMsg(m) == Loss /\ m \in net /\ net' = net \ {m} /\ UNCHANGED <<conn, ridTable, qpnTable, nextLid, crashes, bogusStale>>

\* A crash loses all CM state; the peers keep theirs, which is how stale
\* connections arise. QPs are gone too, so their numbers come back. The comm
\* ID allocator restarts from a random point (Linux seeds it at boot), which
\* the model keeps as "where it was", so new IDs differ from the old ones.
CrashNode(n) ==
    /\ crashes < MaxCrashes
    /\ conn' = [conn EXCEPT ![n] = [h \in Handles |-> IdleConn]]
    /\ ridTable' = [ridTable EXCEPT ![n] = {}]
    /\ qpnTable' = [qpnTable EXCEPT ![n] = {}]
    /\ net' = {m \in net : m.dst # n}
    /\ crashes' = crashes + 1
    /\ UNCHANGED <<nextLid, bogusStale>>

\* A node with no id to lose: the crash only loses messages, which Lose
\* does; the model skips it.
Crash(n) == (\E h \in Handles : conn[n][h].state # "IDLE") /\ CrashNode(n)

\* One action per receive event: TLC names a step after the operator around
\* an \E over the (state-dependent) network, so each gets its own.
RecvREQ == \E m \in net : RecvREQMsg(m)
RecvREQRefused == \E m \in net : RecvREQRefusedMsg(m)
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
Lose == \E m \in net : LoseMsg(m)

Next ==
    \/ \E n \in Nodes, h \in Handles :
          \/ Connect(n, h) \/ Accept(n, h) \/ SendMRA(n, h) \/ SendRTU(n, h) \/ Reject(n, h)
          \/ Disconnect(n, h) \/ SendDREP(n, h) \/ CommEst(n, h) \/ Destroy(n, h)
          \/ Timeout(n, h) \/ TimeoutFinal(n, h) \/ TimeWaitExpiry(n, h)
    \/ RecvREQ \/ RecvREQStale \/ RecvREQUnlisted \/ RecvREQRefused \/ RecvREP \/ RecvREPStale
    \/ RecvMRA \/ RecvREJ \/ RecvREJStale \/ RecvRTU \/ RecvDREQ \/ RecvDREQOtherQPN \/ RecvDREP \/ Lose
    \/ \E n \in Nodes : Crash(n)

\* The application answers, timers fire, TimeWait ends.
Fairness ==
    /\ \A n \in Nodes, h \in Handles :
          /\ WF_vars(Accept(n, h)) /\ WF_vars(SendRTU(n, h)) /\ WF_vars(SendDREP(n, h))
          /\ WF_vars(Timeout(n, h)) /\ WF_vars(TimeoutFinal(n, h)) /\ WF_vars(TimeWaitExpiry(n, h))

Spec == Init /\ [][Next]_vars
LiveSpec == Spec /\ Fairness

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
        /\ \A h \in Handles :
              /\ (conn[n][h].state \in RemoteIDStates) = (\E e \in ridTable[n] : e[3] = h)
              /\ LET has == \E e \in qpnTable[n] : e[3] = h IN
                 \* Legacy: a TimeWait id keeps the entry it had when connected.
                 IF LegacyTimeWaitQPN /\ conn[n][h].state \in TimeWaitStates THEN TRUE
                 ELSE (conn[n][h].state \in ConnectedStates) = has

\* A local comm ID is never reused before TimeWait exit.
UniqueLocalCommID ==
    \A n \in Nodes, h1, h2 \in Handles :
        (h1 # h2 /\ conn[n][h1].state \in HoldStates /\ conn[n][h2].state \in HoldStates)
            => conn[n][h1].lid # conn[n][h2].lid

\* Two ESTABLISHED ends that name each other agree on comm IDs and QPNs.
EstablishedAgree ==
    \A a, b \in Nodes, x, y \in Handles :
        LET cx == conn[a][x]  cy == conn[b][y] IN
        (cx.state = "ESTABLISHED" /\ cy.state = "ESTABLISHED" /\ a # b
         /\ cx.rnode = b /\ cx.rid = cy.lid /\ cy.rnode = a /\ cy.rid = cx.lid)
            => cx.rqpn = cy.qpn /\ cy.rqpn = cx.qpn

(* Liveness under Fairness (AttemptStates is the definition's).            *)
AttemptsEnd == \A n \in Nodes, h \in Handles :
    conn[n][h].state \in AttemptStates ~> conn[n][h].state \in {"ESTABLISHED", "IDLE"}

TimeWaitEnds == \A n \in Nodes, h \in Handles :
    conn[n][h].state = "TIMEWAIT" ~> conn[n][h].state = "IDLE"

=============================================================================
