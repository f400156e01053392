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
(*            order of first use, service IDs and masks onto the bits that *)
(*            tell them apart, node n is simnet's n-th node);              *)
(*   TraceBitWeight(i) : the engine bits model service-ID bit i stands for.*)
(*                                                                         *)
(* A line is [ev, node, lid, listen, sid, mask, peer, q, retries, alt, x,  *)
(* msg, sent, ids]: the engine event (named like the spec's action,        *)
(* mapping.go), the node, the id's comm ID (a listen, which the model     *)
(* gives none, by its service ID and mask), the call's parameters (Connect *)
(* and SIDRRequest: peer, service ID, Max CM Retries, alternate path, QPN; *)
(* Listen: service ID and mask; Accept: QPN; x: the REJ reason, APR or     *)
(* SIDR_REP status the call gives), the message received, the set of      *)
(* messages the step sent, and the ids the step left with their fields     *)
(* after it. An "Inject" line puts a message a test made into the network; *)
(* the next line receives it.                                              *)
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

\* The slot of the id x names on node n in c, or 0: by comm ID, a listen by
\* its service ID and mask (unique: equal listens are refused).
HandleOf(c, n, x) ==
    LET hs == IF x.listen
              THEN {h \in Handles : c[n][h].state \in ListenStates /\ c[n][h].sid = x.sid /\ c[n][h].mask = x.mask}
              ELSE {h \in Handles : c[n][h].lid = x.lid /\ c[n][h].state # "IDLE"}
    IN IF hs = {} THEN 0 ELSE Min(hs)

\* After the step, each id the line names is as the engine left it.
PostOK ==
    \A x \in Line.ids :
        LET h == HandleOf(conn', Line.node, x) IN
        IF x.post.state = "IDLE" THEN h = 0
        ELSE /\ h # 0
             /\ conn'[Line.node][h].state = x.post.state
             \* (TLC takes an action's disjuncts as branches: IF, not \/.)
             /\ IF x.listen THEN TRUE ELSE
                /\ conn'[Line.node][h].qpn = x.post.qpn
                /\ conn'[Line.node][h].rnode = x.post.rnode
                /\ conn'[Line.node][h].rid = x.post.rid
                /\ conn'[Line.node][h].rqpn = x.post.rqpn
                /\ conn'[Line.node][h].retries = x.post.retries
                /\ conn'[Line.node][h].lap = x.post.lap
                /\ conn'[Line.node][h].alt = x.post.alt

\* The messages the spec sends are the ones the engine sent. The network
\* keeps every message (it may duplicate, and an engine retransmits the
\* same message), so net' = net \cup out.
SentOK == Line.sent \subseteq net' /\ (net' \ net) \subseteq Line.sent

\* An application call or a timer on the line's id.
TApp(Act(_, _)) ==
    LET n == Line.node
        h == HandleOf(conn, n, Line)
    IN h # 0 /\ Act(n, h)

\* A call that gives a reason or a status: the engine's.
TCall(ev) ==
    LET n == Line.node
        h == HandleOf(conn, n, Line)
    IN h # 0 /\ AppCall(n, h, ev, Line.x)

\* Calls that create an id take the engine's parameters (any QPN: the
\* model's Connect and Accept take the lowest free one, as QPNs are
\* interchangeable); a new id takes the lowest free slot.
TConnect ==
    LET n == Line.node IN
    /\ FreeHandles(n) # {}
    /\ nextLid[n] = Line.lid
    /\ ConnectWith(n, Min(FreeHandles(n)), Line.peer, Line.q, Line.sid, Line.retries, Line.alt)

TSIDRRequest ==
    LET n == Line.node IN
    /\ FreeHandles(n) # {}
    /\ nextLid[n] = Line.lid
    /\ SIDRRequestWith(n, Min(FreeHandles(n)), Line.peer, Line.sid, Line.retries)

TListen == LET n == Line.node IN FreeHandles(n) # {} /\ ListenWith(n, Min(FreeHandles(n)), Line.sid, Line.mask)

TAccept == LET n == Line.node IN LET h == HandleOf(conn, n, Line) IN h # 0 /\ AcceptWith(n, h, Line.q)

\* A receive of the line's message; the network keeps a copy.
TRecv(Act(_)) == Act(Line.msg) /\ Line.msg \in net'

\* A message a test made: it enters the network, nothing else changes.
TInject == net' = net \cup {Line.msg}
           /\ UNCHANGED <<conn, ridTable, qpnTable, lsnTable, sidrTable, nextLid, inc, crashes, bogusStale, broken>>

TStep ==
    CASE Line.ev = "Connect"         -> TConnect
      [] Line.ev = "Listen"          -> TListen
      [] Line.ev = "SIDRRequest"     -> TSIDRRequest
      [] Line.ev = "Accept"          -> TAccept
      [] Line.ev = "SendMRA"         -> TApp(SendMRA)
      [] Line.ev = "SendRTU"         -> TApp(SendRTU)
      [] Line.ev = "Reject"          -> TCall("Reject")
      [] Line.ev = "Disconnect"      -> TApp(Disconnect)
      [] Line.ev = "SendDREP"        -> TApp(SendDREP)
      [] Line.ev = "CommEst"         -> TApp(CommEst)
      [] Line.ev = "Destroy"         -> TApp(Destroy)
      [] Line.ev = "LoadAltPath"     -> TApp(LoadAltPath)
      [] Line.ev = "AnswerLAP"       -> TApp(AnswerLAP)
      [] Line.ev = "RejectLAP"       -> TCall("RejectLAP")
      [] Line.ev = "SIDRReply"       -> TCall("SIDRReply")
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
      [] Line.ev = "RecvLAP"         -> TRecv(RecvLAPMsg)
      [] Line.ev = "RecvAPR"         -> TRecv(RecvAPRMsg)
      [] Line.ev = "RecvAPRRejected" -> TRecv(RecvAPRRejectedMsg)
      [] Line.ev = "RecvSIDRREQ"     -> TRecv(RecvSIDRREQMsg)
      [] Line.ev = "RecvSIDRREQUnlisted" -> TRecv(RecvSIDRREQUnlistedMsg)
      [] Line.ev = "RecvSIDRREP"     -> TRecv(RecvSIDRREPMsg)
      [] Line.ev = "RecvClassPortInfoGet" -> TRecv(RecvClassPortInfoGetMsg)
      [] Line.ev = "Crash"           -> CrashNode(Line.node)
      [] Line.ev = "Inject"          -> TInject
      [] OTHER                       -> FALSE

TraceInit == Init /\ ti \in DOMAIN Traces /\ l = 1

TraceNext ==
    /\ l <= Len(Traces[ti])
    /\ TStep
    /\ PostOK
    /\ Line.ev \in {"Crash", "Inject"} \/ SentOK
    /\ l' = l + 1
    /\ UNCHANGED ti

TraceSpec == TraceInit /\ [][TraceNext]_tvars

\* CONSTRAINT: reports how far each trace got (always TRUE).
TraceReport == PrintT(<<"at", ti, l>>)

=============================================================================
