------------------------------ MODULE Tracecm ------------------------------
(***************************************************************************)
(* Trace validation: is a trace the Go engine recorded a behaviour of      *)
(* spec/cm.tla? In the style of etcd-io/raft's Traceetcdraft and CCF's     *)
(* Traceccfraft, but the pinned TLC has no Json module, so the traces come *)
(* as a generated module, TraceData, which defines                         *)
(*                                                                         *)
(*   Traces : a tuple of traces, each a tuple of lines, already mapped     *)
(*            onto the model's values by conformance.ToTLA (comm IDs       *)
(*            renumbered per node in allocation order, QPNs per node in    *)
(*            order of first use, node n is simnet's n-th node).           *)
(*                                                                         *)
(* A line is [ev, node, lid, peer, q, msg, sent, ids]: the engine event    *)
(* (named like the spec's action, mapping.go), the node, the id's comm ID, *)
(* for Connect the server and for Connect and Accept the QPN, the message  *)
(* received, the set of messages the step sent, and the ids the step left  *)
(* with their fields after it ([lid, post]).                               *)
(*                                                                         *)
(* TLC explores every trace at once (ti chooses one in Init) breadth       *)
(* first; TraceReport prints <<"at", ti, l>> for each state, so a trace    *)
(* was accepted when some state reached l = Len(trace) + 1. A trace the    *)
(* spec cannot follow stops short: the line it stopped at is the first     *)
(* step the spec does not allow.                                           *)
(***************************************************************************)
EXTENDS cm, Sequences, TLC, TraceData

VARIABLES ti, l

tvars == <<vars, ti, l>>

Line == Traces[ti][l]

\* The id with comm ID lid on node n, or 0.
HandleOf(c, n, lid) == IF \E h \in Handles : c[n][h].lid = lid /\ c[n][h].state # "IDLE"
                       THEN CHOOSE h \in Handles : c[n][h].lid = lid /\ c[n][h].state # "IDLE"
                       ELSE 0

\* After the step, each id the line names is as the engine left it.
PostOK ==
    \A x \in Line.ids :
        LET h == HandleOf(conn', Line.node, x.lid) IN
        IF x.post.state = "IDLE" THEN h = 0
        ELSE /\ h # 0
             /\ conn'[Line.node][h].state = x.post.state
             /\ conn'[Line.node][h].qpn = x.post.qpn
             /\ conn'[Line.node][h].rnode = x.post.rnode
             /\ conn'[Line.node][h].rid = x.post.rid
             /\ conn'[Line.node][h].rqpn = x.post.rqpn
             /\ conn'[Line.node][h].retries = x.post.retries

\* The messages the spec sends are the ones the engine sent. The network
\* keeps every message (it may duplicate, and an engine retransmits the
\* same message), so net' = net \cup out.
SentOK == Line.sent \subseteq net' /\ (net' \ net) \subseteq Line.sent

\* An application call or a timer on the line's id.
TApp(Act(_, _)) ==
    LET n == Line.node
        h == HandleOf(conn, n, Line.lid)
    IN h # 0 /\ Act(n, h)

\* Connect and Accept take the engine's QPN (any free one: the model's
\* Connect and Accept take the lowest, as QPNs are interchangeable).
\* Handles are interchangeable too: a new id takes the lowest free one.
TConnect ==
    LET n == Line.node IN
    /\ FreeHandles(n) # {}
    /\ nextLid[n] = Line.lid
    /\ ConnectWith(n, Min(FreeHandles(n)), Line.peer, Line.q)

TAccept == LET n == Line.node IN LET h == HandleOf(conn, n, Line.lid) IN h # 0 /\ AcceptWith(n, h, Line.q)

\* A receive of the line's message; the network keeps a copy.
TRecv(Act(_)) == Act(Line.msg) /\ Line.msg \in net'

TStep ==
    CASE Line.ev = "Connect"         -> TConnect
      [] Line.ev = "Accept"          -> TAccept
      [] Line.ev = "SendMRA"         -> TApp(SendMRA)
      [] Line.ev = "SendRTU"         -> TApp(SendRTU)
      [] Line.ev = "Reject"          -> TApp(Reject)
      [] Line.ev = "Disconnect"      -> TApp(Disconnect)
      [] Line.ev = "SendDREP"        -> TApp(SendDREP)
      [] Line.ev = "CommEst"         -> TApp(CommEst)
      [] Line.ev = "Destroy"         -> TApp(Destroy)
      [] Line.ev = "Timeout"         -> TApp(Timeout)
      [] Line.ev = "TimeoutFinal"    -> TApp(TimeoutFinal)
      [] Line.ev = "TimeWaitExpiry"  -> TApp(TimeWaitExpiry)
      [] Line.ev = "RecvREQ"         -> TRecv(RecvREQMsg)
      [] Line.ev = "RecvREQStale"    -> TRecv(RecvREQStaleMsg)
      [] Line.ev = "RecvREQUnlisted" -> TRecv(RecvREQUnlistedMsg)
      [] Line.ev = "RecvREQRefused"  -> TRecv(RecvREQRefusedMsg)
      [] Line.ev = "RecvREP"         -> TRecv(RecvREPMsg)
      [] Line.ev = "RecvREPStale"    -> TRecv(RecvREPStaleMsg)
      [] Line.ev = "RecvMRA"         -> TRecv(RecvMRAMsg)
      [] Line.ev = "RecvREJ"         -> TRecv(RecvREJMsg)
      [] Line.ev = "RecvREJStale"    -> TRecv(RecvREJStaleMsg)
      [] Line.ev = "RecvRTU"         -> TRecv(RecvRTUMsg)
      [] Line.ev = "RecvDREQ"        -> TRecv(RecvDREQMsg)
      [] Line.ev = "RecvDREQOtherQPN" -> TRecv(RecvDREQOtherQPNMsg)
      [] Line.ev = "RecvDREP"        -> TRecv(RecvDREPMsg)
      [] Line.ev = "Crash"           -> CrashNode(Line.node)
      [] OTHER                       -> FALSE

TraceInit == Init /\ ti \in DOMAIN Traces /\ l = 1

TraceNext ==
    /\ l <= Len(Traces[ti])
    /\ TStep
    /\ PostOK
    /\ Line.ev = "Crash" \/ SentOK
    /\ l' = l + 1
    /\ UNCHANGED ti

TraceSpec == TraceInit /\ [][TraceNext]_tvars

\* CONSTRAINT: reports how far each trace got (always TRUE).
TraceReport == PrintT(<<"at", ti, l>>)

=============================================================================
