------------------------------ MODULE IndInvcm ------------------------------
(***************************************************************************)
(* An inductive invariant of the core model (spec/cm.tla with one client,  *)
(* servers that listen from the start, no LAP, no SIDR, no ClassPortInfo): *)
(* IndInv holds initially and every step of Next keeps it, so it holds in  *)
(* every reachable state at every depth, whatever the length of the       *)
(* behaviour, for the constants it is checked with. It implies             *)
(* NoBogusStaleReject, StaleDetected, TablesMatchStates, UniqueLocalCommID *)
(* and EstablishedAgree.                                                   *)
(*                                                                         *)
(* TLC checks it (docs/model.md):                                          *)
(*   IndInvcm_init.cfg   initiation: Init => IndInv;                       *)
(*   IndInvcm.cfg        consecution, exhaustively: every IndInv state of  *)
(*                       the domain below, one step of Next, IndInv again, *)
(*                       and the five invariants in every IndInv state;    *)
(*   IndInvcm_legacy.cfg and IndInvcm_drop_*.cfg: must fail, with the      *)
(*                       legacy TimeWait definition and with a conjunct    *)
(*                       left out (Dropped).                               *)
(* The variable stepped stops the search after that one step.              *)
(***************************************************************************)
EXTENDS cm

VARIABLE stepped    \* consecution: FALSE in the IndInv state, TRUE after one step

ivars == <<vars, stepped>>

-----------------------------------------------------------------------------
(* The conjuncts.                                                           *)

\* The core model's messages.
CoreMsgTypes == {"REQ", "MRA", "REJ", "REP", "RTU", "DREQ", "DREP"}

\* The REJ reasons a REJ can carry: the table's, and the ones the model's
\* calls and bounds give (Reject 28, no resources 3).
RejReasons == {Table[s][e].reason : s \in States, e \in Events} \cup {3, 28}

\* An id of a connection (not IDLE, not a listen).
IsConn(c) == c.state \notin {"IDLE", "LISTEN"}

\* IdShape: what each state says about an id's fields. An active id has its
\* QP from Connect and learns the peer's comm ID and QPN from the REP (both
\* at once); a passive id learns them from the REQ and gets its QP when the
\* application accepts (the REP carries it). The retries count only while
\* a timer runs.
IdShape(n, c) ==
    CASE c.state = "IDLE" -> c = IdleConn
      [] c.state = "LISTEN" -> n \in Servers /\ c.sid \in ServedIDs /\ c = ListenConn(c.sid, ExactMask)
      [] OTHER ->
         /\ c.state \notin SIDRStates \cup {"SIDR_REQ_SENT"}
         /\ c.lid \in CommIDs /\ c.rnode \in Nodes \ {n}
         /\ c.maxr \in Retries /\ c.retries \in 0..c.maxr
         /\ ~TimerRuns(c.state, c.lap) => c.retries = 0
         /\ c.sid \in ServiceIDs /\ c.mask = 0 /\ c.alt \in AltPaths
         /\ c.lap = (IF c.state \in LAPHostStates THEN LAPStart(c.alt) ELSE LAPOff)
         /\ (c.rid = 0) = (c.rqpn = 0)
         /\ c.active => n \in Clients /\ c.qpn \in QPNs
         /\ ~c.active => n \in Servers /\ c.rid # 0
         /\ c.state \in LearnsREPStates => c.active /\ c.rid = 0
         /\ c.state \in {"REP_RCVD", "MRA_REP_SENT"} => c.active
         /\ c.state \in {"REP_SENT", "MRA_REP_RCVD"} => ~c.active
         /\ c.state \in {"REQ_RCVD", "MRA_REQ_SENT"} => ~c.active /\ c.qpn = 0
         /\ c.state \in ConnectedStates => c.rid # 0
         /\ c.state \in ConnectedStates \ {"REQ_RCVD", "MRA_REQ_SENT"} => c.qpn # 0

\* A server's listens stay in the first slots, where Init put them: only an
\* application that listens (Listeners) destroys a listen, and a crash puts
\* them back.
ListensInPlace == \A n \in Servers, h \in Handles : h <= Cardinality(ServedIDs) => conn[n][h] = InitConn(n)[h]

IdsShaped == /\ \A n \in Nodes, h \in Handles : IdShape(n, conn[n][h])
             /\ ListensInPlace

\* MsgShape: what each message carries. A REQ names its sender's comm ID
\* and QP; a REP both too, and the comm ID it answers; every stateful
\* message names its sender's comm ID, but a REJ from an id the peer never
\* heard of (and a stateless one) names none.
MsgShape(m) ==
    /\ m.type \in CoreMsgTypes /\ m.src # m.dst
    /\ m.type \notin {"REQ", "DREQ", "REP"} => m.qpn = 0
    /\ m.type # "REJ" => m.info = 0
    /\ m.type \notin {"MRA", "REJ"} => m.what = 0
    /\ m.type # "REQ" => m.sid = 0 /\ m.retries = 0 /\ m.alt = FALSE
    /\ CASE m.type = "REQ"  -> m.src \in Clients /\ m.lid \in CommIDs /\ m.rid = 0 /\ m.qpn \in QPNs
                               /\ m.sid \in ServiceIDs /\ m.retries \in Retries /\ m.alt \in AltPaths
         [] m.type = "REP"  -> m.src \in Servers /\ m.lid \in CommIDs /\ m.rid \in CommIDs /\ m.qpn \in QPNs
         [] m.type = "MRA"  -> m.lid \in CommIDs /\ m.rid \in CommIDs /\ m.what \in {0, 1}
                               /\ (m.what = 0 => m.src \in Servers) /\ (m.what = 1 => m.src \in Clients)
         [] m.type = "RTU"  -> m.src \in Clients /\ m.lid \in CommIDs /\ m.rid \in CommIDs
         [] m.type = "DREQ" -> m.lid \in CommIDs /\ m.rid \in CommIDs /\ m.qpn \in QPNs
         [] m.type = "DREP" -> m.lid \in CommIDs /\ m.rid \in CommIDs
         [] m.type = "REJ"  -> m.info \in RejReasons /\ m.what \in 0..2

MsgsShaped == \A m \in net : MsgShape(m)

\* FreshLids: the allocator's cursor is past every comm ID of its node that
\* anything still names: its ids, the messages it sent (and the ones sent
\* to it, which name it in rid), and the peers' ids bound to it. A new id
\* can therefore never be taken for an old one.
FreshIds == \A n \in Nodes :
                /\ \A h \in Handles : conn[n][h].lid < nextLid[n]
                /\ \A b \in Nodes, y \in Handles : conn[b][y].rnode = n => conn[b][y].rid < nextLid[n]
FreshMsg(m) == m.lid < nextLid[m.src] /\ m.rid < nextLid[m.dst]
FreshLids == FreshIds /\ \A m \in net : FreshMsg(m)

\* The live id of node n with comm ID x, as a set (empty or one).
LiveWith(n, x) == {h \in Handles : IsConn(conn[n][h]) /\ conn[n][h].lid = x}

\* MsgQPN: a REQ or REP in flight carries the QPN its sender's id still has.
QPNOf(m) == m.type \in {"REQ", "REP"} => \A h \in LiveWith(m.src, m.lid) : conn[m.src][h].qpn = m.qpn
MsgQPN == \A m \in net : QPNOf(m)

\* PeerQPN: an id that names a live peer id (by node and comm ID) knows
\* that id's QPN. EstablishedAgree is this, for two ESTABLISHED ends.
PeerQPN ==
    \A a \in Nodes, x \in Handles :
        LET cx == conn[a][x] IN
        (IsConn(cx) /\ cx.rid # 0) => \A y \in LiveWith(cx.rnode, cx.rid) : cx.rqpn = conn[cx.rnode][y].qpn

\* The conjuncts, by name: MustFail drops one (IndInvcm_drop_*.cfg).
Conjuncts == <<"TypeOK", "NoBogusStaleReject", "IdsShaped", "MsgsShaped", "TablesMatchStates",
               "StaleDetected", "UniqueLocalCommID", "FreshLids", "MsgQPN", "PeerQPN">>

Conjunct(name) ==
    CASE name = "TypeOK" -> TypeOK
      [] name = "NoBogusStaleReject" -> NoBogusStaleReject
      [] name = "IdsShaped" -> IdsShaped
      [] name = "MsgsShaped" -> MsgsShaped
      [] name = "TablesMatchStates" -> TablesMatchStates
      [] name = "StaleDetected" -> StaleDetected
      [] name = "UniqueLocalCommID" -> UniqueLocalCommID
      [] name = "FreshLids" -> FreshLids
      [] name = "MsgQPN" -> MsgQPN
      [] name = "PeerQPN" -> PeerQPN

CONSTANT Dropped    \* the name of a conjunct left out of IndInv (a must-fail check), or "none"

IndInv == \A i \in DOMAIN Conjuncts : Conjuncts[i] # Dropped => Conjunct(Conjuncts[i])

-----------------------------------------------------------------------------
(* The domain: every state TypeOK allows, restricted by the conjuncts that *)
(* speak of one id or one message, enumerated so that TLC prunes early.   *)
(* Fields that no step reads take one value each (docs/model.md says why  *)
(* that covers the others): inc, rinc and a message's inc are read by      *)
(* nothing but NoCrossIncarnation, broken by nothing; crashes only bounds  *)
(* Crash (with crashes = 0 every step of a state with more crashes is      *)
(* possible too); a REJ's receiver reads its reason only as stale (10) or *)
(* not (28 stands for the others) and never reads what it rejects.        *)
(* IndInv does not mention them.                                           *)

\* The records an id of node n may hold (IdShape, or the Dropped check's
\* wider domain when IdsShaped is the conjunct left out).
ConnDom(n) ==
    LET ids == [state : States \ ({"IDLE", "LISTEN", "SIDR_REQ_SENT"} \cup SIDRStates),
                lid : CommIDs, qpn : QPNs \cup {0}, rnode : Nodes \ {n}, rid : CommIDs \cup {0},
                rqpn : QPNs \cup {0}, retries : 0..MaxRetry, maxr : Retries,
                lap : IF LAP THEN LAPStates ELSE {LAPOff}, alt : AltPaths, active : BOOLEAN,
                sid : ServiceIDs, mask : {0}, rinc : {0}]
    IN {IdleConn} \cup (IF n \in Servers THEN {ListenConn(s, ExactMask) : s \in ServedIDs} ELSE {})
       \cup {c \in ids : Dropped = "IdsShaped" \/ IdShape(n, c)}

\* Node n's slots: no two ids with one comm ID, no two connected to one
\* remote QP (the conjuncts about one node, checked here to prune).
NodeDom(n) == {f \in [Handles -> ConnDom(n)] :
                  /\ Dropped = "IdsShaped" \/ n \notin Servers \/
                        \A h \in Handles : h <= Cardinality(ServedIDs) => f[h] = InitConn(n)[h]
                  /\ Dropped = "UniqueLocalCommID" \/
                        \A h1, h2 \in Handles : (h1 # h2 /\ IsConn(f[h1]) /\ IsConn(f[h2])) => f[h1].lid # f[h2].lid
                  /\ Dropped = "StaleDetected" \/
                        \A h1, h2 \in Handles : (h1 # h2 /\ f[h1].state \in ConnectedStates /\ f[h2].state \in ConnectedStates)
                                                   => <<f[h1].rnode, f[h1].rqpn>> # <<f[h2].rnode, f[h2].rqpn>>}

MsgDom ==
    LET base == [type : CoreMsgTypes, src : Nodes, dst : Nodes, lid : CommIDs \cup {0}, rid : CommIDs \cup {0},
                 qpn : {0}, info : {0}, what : {0}, sid : {0}, retries : {0}, alt : {FALSE}, inc : {0}]
        req  == [type : {"REQ"}, src : Clients, dst : Nodes, lid : CommIDs, rid : {0}, qpn : QPNs, info : {0},
                 what : {0}, sid : ServiceIDs, retries : Retries, alt : AltPaths, inc : {0}]
        qp   == [type : {"REP", "DREQ"}, src : Nodes, dst : Nodes, lid : CommIDs, rid : CommIDs, qpn : QPNs,
                 info : {0}, what : {0}, sid : {0}, retries : {0}, alt : {FALSE}, inc : {0}]
        mra  == [type : {"MRA"}, src : Nodes, dst : Nodes, lid : CommIDs, rid : CommIDs, qpn : {0},
                 info : {0}, what : {0, 1}, sid : {0}, retries : {0}, alt : {FALSE}, inc : {0}]
        rej  == [type : {"REJ"}, src : Nodes, dst : Nodes, lid : CommIDs \cup {0}, rid : CommIDs \cup {0}, qpn : {0},
                 info : {10, 28}, what : {0}, sid : {0}, retries : {0}, alt : {FALSE}, inc : {0}]
    IN {m \in base \cup req \cup qp \cup mra \cup rej : Dropped = "MsgsShaped" \/ MsgShape(m)}

\* The sets of at most k messages from S.
Upto(S, k) == UNION {{{f[i] : i \in 1..j} : f \in [1..j -> S]} : j \in 0..k}

\* Given conn, the tables are what TablesMatchStates makes them (one entry
\* per id in a state that has one, with the id's fields). Under the legacy
\* TimeWait definition a TimeWait id may keep its remote-QPN entry or not.
RIDTab(n) == {<<conn[n][h].rnode, conn[n][h].rid, h>> : h \in {h \in Handles : conn[n][h].state \in RemoteIDStates}}
LsnTab(n) == {<<conn[n][h].sid, conn[n][h].mask, h>> : h \in {h \in Handles : conn[n][h].state \in ListenStates}}
QPNTab(n, tw) == {<<conn[n][h].rnode, conn[n][h].rqpn, h>> : h \in {h \in Handles : conn[n][h].state \in ConnectedStates} \cup tw}

\* The functions on S with f[n] in NodeDom(n), built node by node.
RECURSIVE NodeDoms(_)
NodeDoms(S) == IF S = {} THEN {[n \in {} |-> IdleConn]}
               ELSE LET n == CHOOSE x \in S : TRUE
                    IN {[k \in S |-> IF k = n THEN a ELSE g[k]] : a \in NodeDom(n), g \in NodeDoms(S \ {n})}

\* Nets is evaluated once, at startup (constant-level, no arguments);
\* Conns once too, where IDomain starts: its argument keeps TLC from
\* computing it at startup for the sampled check, which does not use it.
Conns(unused) == NodeDoms(Nodes)
Nets == Upto(MsgDom, MaxNet)

\* The conjuncts are checked as soon as the variables they read are chosen.
IDomain ==
    /\ conn \in Conns(0)
    /\ Dropped = "PeerQPN" \/ PeerQPN
    /\ nextLid \in [Nodes -> 1..(MaxCommID + 1)]
    /\ Dropped = "FreshLids" \/ FreshIds
    /\ ridTable = [n \in Nodes |-> RIDTab(n)]
    /\ lsnTable = [n \in Nodes |-> LsnTab(n)]
    /\ sidrTable = [n \in Nodes |-> {}]
    /\ \E tw \in [Nodes -> SUBSET (IF LegacyTimeWaitQPN \/ Dropped = "TablesMatchStates" THEN Handles ELSE {})] :
          /\ \A n \in Nodes : \A h \in tw[n] : conn[n][h].state \in TimeWaitStates /\ conn[n][h].rqpn # 0
          /\ qpnTable = [n \in Nodes |-> QPNTab(n, tw[n])]
    /\ net \in {s \in Nets : \A m \in s : (Dropped = "FreshLids" \/ FreshMsg(m)) /\ (Dropped = "MsgQPN" \/ QPNOf(m))}
    /\ inc = [n \in Nodes |-> 1]
    /\ crashes = 0
    /\ bogusStale \in IF Dropped = "NoBogusStaleReject" THEN BOOLEAN ELSE {FALSE}
    /\ broken = {}

\* Consecution: an IndInv state, then one step. IDomain checks every
\* conjunct of IndInv as it goes, and TLC checks IndInv as an invariant of
\* each initial state too. With a conjunct Dropped the domain is wider than
\* the rest of IndInv allows (TypeOK, say): IndInv picks the states.
IInit == IDomain /\ (Dropped = "none" \/ IndInv) /\ stepped = FALSE
INext == ~stepped /\ Next /\ stepped' = TRUE
ISpec == IInit /\ [][INext]_ivars

\* Initiation: the initial states, no step.
InitOnly == Init /\ stepped = TRUE
InitSpec == InitOnly /\ [][INext]_ivars

\* The model itself (stepped stays TRUE): IndInv holds in every reachable
\* state, which initiation and consecution imply, and which a complete
\* search of the same constants confirms.
ReachSpec == Init /\ stepped = TRUE /\ [][Next /\ UNCHANGED stepped]_ivars

=============================================================================
