package main

// This file is the one definition of the CM wire format, in the layout
// Linux uses (include/rdma/ibta_vol1_c12.h with the ECE vendor-ID fields
// and, for ClassPortInfo, include/rdma/ib_mad.h struct ib_class_port_info).
// docs/wire-layout.md describes the same layout for readers, and
// TestTableMatchesDoc fails when the two differ.
//
// Offsets are inside the message body (the 232-byte MAD data area, or the
// 72-byte ClassPortInfo body), not inside the MAD: add 24 for the absolute MAD
// offset. Bit offsets count from the most significant bit of Byte (bit 0 is
// the MSB, IBTA "Byte[Bit]" notation); a field may run on into later bytes.
// Every bit not covered by a row is reserved: written as zero, ignored on read.

// field is one row of a message table.
type field struct {
	Macro string // Linux macro name, e.g. CM_REQ_LOCAL_QPN; its suffix gives the JSON name
	Byte  int    // byte offset inside the message body
	Bit   int    // bit offset inside Byte, MSB = 0
	Width int    // width in bits

	// Go overrides the Go field name derived from the macro suffix.
	Go string
	// Type is the Go type of the field. Empty means derived from Width:
	// bool (1 bit), uint8/16/32/64, or a byte array for wide opaque fields.
	Type string
	// Doc is an optional extra sentence for the field's doc comment.
	Doc string
}

// message is one CM message (or ClassPortInfo) table.
type message struct {
	Go     string // Go type name
	Wire   string // the name in JSON "type" and in AttrID.String()
	Prefix string // macro prefix stripped to form field names, e.g. CM_REQ_
	AttrID uint16
	Size   int    // body size in bytes
	Table  string // IBTA table reference for the doc comment
	Doc    string
	// PrivateConst names the exported constant generated for the size of
	// the private-data field, if the message has one.
	PrivateConst string
	Fields       []field
}

const dataSize = 232 // IB_MGMT_MAD_DATA

// headerField is one field of the MAD common header. Every header field
// starts at the MSB of its byte.
type headerField struct {
	Name  string // Go field name in Header, and the suffix of its Peek and Put functions
	Byte  int    // byte offset inside the MAD
	Width int    // width in bits: 8, 16, 32 or 64
	Type  string // Go type; empty means uint8/16/32/64 by Width
	Doc   string // the field's doc comment, after its name
}

// header is the MAD common header (IBTA Vol 1 13.4.3), the first HeaderSize
// bytes of every MAD; bytes 18-19 are reserved.
var header = []headerField{
	{Name: "BaseVersion", Byte: 0, Width: 8, Doc: "is the MAD format version, 1."},
	{Name: "MgmtClass", Byte: 1, Width: 8, Doc: "is the management class, 0x07 for the CM."},
	{Name: "ClassVersion", Byte: 2, Width: 8, Doc: "is the version of the class, 2 for the CM."},
	{Name: "Method", Byte: 3, Width: 8, Doc: "is the method; the R (response) bit is the MSB."},
	{Name: "Status", Byte: 4, Width: 16, Doc: "is the MAD status of a response."},
	{Name: "ClassSpecific", Byte: 6, Width: 16, Doc: "is the class-specific word, unused by the CM."},
	{Name: "TID", Byte: 8, Width: 64, Doc: "is the transaction ID."},
	{Name: "AttrID", Byte: 16, Width: 16, Type: "AttrID", Doc: "names the attribute: for the CM class, the message."},
	{Name: "AttrMod", Byte: 20, Width: 32, Doc: "is the attribute modifier (the ECE attr_mod in REQ, REP and SIDR_REP)."},
}

// peeks are the message fields a receiver reads in place before (or
// instead of) decoding the MAD: the IDs a demultiplexer routes by and what
// an observer of the fabric counts. Each gets a function that reads the
// field from whichever message has it, by the MAD's attribute ID.
var peeks = []string{"LocalCommID", "RemoteCommID", "RequestID", "LocalCAGUID", "LocalQPN", "Reason"}

var messages = []message{
	{
		Go: "ClassPortInfo", Wire: "ClassPortInfo", Prefix: "", AttrID: 0x0001, Size: 72,
		Table: "generic MAD attribute 0x0001; Linux struct ib_class_port_info",
		Doc: "is the generic MAD ClassPortInfo attribute: the body of a Get/GetResp(ClassPortInfo) " +
			"and the 72-byte redirect information carried in a REJ ARI (reason 24) and in " +
			"SIDR_REP/APR additional information.",
		Fields: []field{
			{Macro: "BASE_VERSION", Byte: 0, Bit: 0, Width: 8},
			{Macro: "CLASS_VERSION", Byte: 1, Bit: 0, Width: 8},
			{Macro: "CAPABILITY_MASK", Byte: 2, Bit: 0, Width: 16},
			{Macro: "CAPABILITY_MASK2", Byte: 4, Bit: 0, Width: 27},
			{Macro: "RESP_TIME_VALUE", Byte: 7, Bit: 3, Width: 5, Doc: "It is a 5-bit timeout: 4.096 µs × 2^value."},
			{Macro: "REDIRECT_GID", Byte: 8, Bit: 0, Width: 128, Type: "GID"},
			{Macro: "REDIRECT_TC", Byte: 24, Bit: 0, Width: 8},
			{Macro: "REDIRECT_SL", Byte: 25, Bit: 0, Width: 4},
			{Macro: "REDIRECT_FL", Byte: 25, Bit: 4, Width: 20},
			{Macro: "REDIRECT_LID", Byte: 28, Bit: 0, Width: 16},
			{Macro: "REDIRECT_P_KEY", Byte: 30, Bit: 0, Width: 16},
			{Macro: "REDIRECT_QP", Byte: 33, Bit: 0, Width: 24},
			{Macro: "REDIRECT_Q_KEY", Byte: 36, Bit: 0, Width: 32},
			{Macro: "TRAP_GID", Byte: 40, Bit: 0, Width: 128, Type: "GID"},
			{Macro: "TRAP_TC", Byte: 56, Bit: 0, Width: 8},
			{Macro: "TRAP_SL", Byte: 57, Bit: 0, Width: 4},
			{Macro: "TRAP_FL", Byte: 57, Bit: 4, Width: 20},
			{Macro: "TRAP_LID", Byte: 60, Bit: 0, Width: 16},
			{Macro: "TRAP_P_KEY", Byte: 62, Bit: 0, Width: 16},
			{Macro: "TRAP_HL", Byte: 64, Bit: 0, Width: 8},
			{Macro: "TRAP_QP", Byte: 65, Bit: 0, Width: 24},
			{Macro: "TRAP_Q_KEY", Byte: 68, Bit: 0, Width: 32},
		},
	},
	{
		Go: "REQ", Wire: "REQ", Prefix: "CM_REQ_", AttrID: 0x0010, Size: dataSize,
		Table: "IBTA Vol 1 Table 106", Doc: "is the CM Request for Communication message.",
		PrivateConst: "REQPrivateDataSize",
		Fields: []field{
			{Macro: "CM_REQ_LOCAL_COMM_ID", Byte: 0, Bit: 0, Width: 32},
			{Macro: "CM_REQ_VENDOR_ID", Byte: 5, Bit: 0, Width: 24, Doc: "ECE (Enhanced Connection Establishment) vendor ID."},
			{Macro: "CM_REQ_SERVICE_ID", Byte: 8, Bit: 0, Width: 64},
			{Macro: "CM_REQ_LOCAL_CA_GUID", Byte: 16, Bit: 0, Width: 64},
			{Macro: "CM_REQ_LOCAL_Q_KEY", Byte: 28, Bit: 0, Width: 32},
			{Macro: "CM_REQ_LOCAL_QPN", Byte: 32, Bit: 0, Width: 24},
			{Macro: "CM_REQ_RESPONDER_RESOURCES", Byte: 35, Bit: 0, Width: 8},
			{Macro: "CM_REQ_LOCAL_EECN", Byte: 36, Bit: 0, Width: 24},
			{Macro: "CM_REQ_INITIATOR_DEPTH", Byte: 39, Bit: 0, Width: 8},
			{Macro: "CM_REQ_REMOTE_EECN", Byte: 40, Bit: 0, Width: 24},
			{Macro: "CM_REQ_REMOTE_CM_RESPONSE_TIMEOUT", Byte: 43, Bit: 0, Width: 5},
			{Macro: "CM_REQ_TRANSPORT_SERVICE_TYPE", Byte: 43, Bit: 5, Width: 2, Type: "TransportServiceType"},
			{Macro: "CM_REQ_END_TO_END_FLOW_CONTROL", Byte: 43, Bit: 7, Width: 1},
			{Macro: "CM_REQ_STARTING_PSN", Byte: 44, Bit: 0, Width: 24},
			{Macro: "CM_REQ_LOCAL_CM_RESPONSE_TIMEOUT", Byte: 47, Bit: 0, Width: 5},
			{Macro: "CM_REQ_RETRY_COUNT", Byte: 47, Bit: 5, Width: 3},
			{Macro: "CM_REQ_PARTITION_KEY", Byte: 48, Bit: 0, Width: 16},
			{Macro: "CM_REQ_PATH_PACKET_PAYLOAD_MTU", Byte: 50, Bit: 0, Width: 4, Type: "MTU"},
			{Macro: "CM_REQ_RDC_EXISTS", Byte: 50, Bit: 4, Width: 1},
			{Macro: "CM_REQ_RNR_RETRY_COUNT", Byte: 50, Bit: 5, Width: 3},
			{Macro: "CM_REQ_MAX_CM_RETRIES", Byte: 51, Bit: 0, Width: 4},
			{Macro: "CM_REQ_SRQ", Byte: 51, Bit: 4, Width: 1},
			{Macro: "CM_REQ_EXTENDED_TRANSPORT_TYPE", Byte: 51, Bit: 5, Width: 3, Type: "ExtTransportType"},
			{Macro: "CM_REQ_PRIMARY_LOCAL_PORT_LID", Byte: 52, Bit: 0, Width: 16},
			{Macro: "CM_REQ_PRIMARY_REMOTE_PORT_LID", Byte: 54, Bit: 0, Width: 16},
			{Macro: "CM_REQ_PRIMARY_LOCAL_PORT_GID", Byte: 56, Bit: 0, Width: 128, Type: "GID"},
			{Macro: "CM_REQ_PRIMARY_REMOTE_PORT_GID", Byte: 72, Bit: 0, Width: 128, Type: "GID"},
			{Macro: "CM_REQ_PRIMARY_FLOW_LABEL", Byte: 88, Bit: 0, Width: 20},
			{Macro: "CM_REQ_PRIMARY_PACKET_RATE", Byte: 91, Bit: 2, Width: 6},
			{Macro: "CM_REQ_PRIMARY_TRAFFIC_CLASS", Byte: 92, Bit: 0, Width: 8},
			{Macro: "CM_REQ_PRIMARY_HOP_LIMIT", Byte: 93, Bit: 0, Width: 8},
			{Macro: "CM_REQ_PRIMARY_SL", Byte: 94, Bit: 0, Width: 4},
			{Macro: "CM_REQ_PRIMARY_SUBNET_LOCAL", Byte: 94, Bit: 4, Width: 1},
			{Macro: "CM_REQ_PRIMARY_LOCAL_ACK_TIMEOUT", Byte: 95, Bit: 0, Width: 5},
			{Macro: "CM_REQ_ALTERNATE_LOCAL_PORT_LID", Byte: 96, Bit: 0, Width: 16},
			{Macro: "CM_REQ_ALTERNATE_REMOTE_PORT_LID", Byte: 98, Bit: 0, Width: 16},
			{Macro: "CM_REQ_ALTERNATE_LOCAL_PORT_GID", Byte: 100, Bit: 0, Width: 128, Type: "GID"},
			{Macro: "CM_REQ_ALTERNATE_REMOTE_PORT_GID", Byte: 116, Bit: 0, Width: 128, Type: "GID"},
			{Macro: "CM_REQ_ALTERNATE_FLOW_LABEL", Byte: 132, Bit: 0, Width: 20},
			{Macro: "CM_REQ_ALTERNATE_PACKET_RATE", Byte: 135, Bit: 2, Width: 6},
			{Macro: "CM_REQ_ALTERNATE_TRAFFIC_CLASS", Byte: 136, Bit: 0, Width: 8},
			{Macro: "CM_REQ_ALTERNATE_HOP_LIMIT", Byte: 137, Bit: 0, Width: 8},
			{Macro: "CM_REQ_ALTERNATE_SL", Byte: 138, Bit: 0, Width: 4},
			{Macro: "CM_REQ_ALTERNATE_SUBNET_LOCAL", Byte: 138, Bit: 4, Width: 1},
			{Macro: "CM_REQ_ALTERNATE_LOCAL_ACK_TIMEOUT", Byte: 139, Bit: 0, Width: 5},
			{Macro: "CM_REQ_SAP_SUPPORTED", Byte: 139, Bit: 5, Width: 1},
			{Macro: "CM_REQ_PRIVATE_DATA", Byte: 140, Bit: 0, Width: 736},
		},
	},
	{
		Go: "MRA", Wire: "MRA", Prefix: "CM_MRA_", AttrID: 0x0011, Size: dataSize,
		Table: "IBTA Vol 1 Table 107", Doc: "is the CM Message Receipt Acknowledgement.",
		PrivateConst: "MRAPrivateDataSize",
		Fields: []field{
			{Macro: "CM_MRA_LOCAL_COMM_ID", Byte: 0, Bit: 0, Width: 32},
			{Macro: "CM_MRA_REMOTE_COMM_ID", Byte: 4, Bit: 0, Width: 32},
			{Macro: "CM_MRA_MESSAGE_MRAED", Byte: 8, Bit: 0, Width: 2, Go: "MessageMRAed", Type: "MsgResponse"},
			{Macro: "CM_MRA_SERVICE_TIMEOUT", Byte: 9, Bit: 0, Width: 5},
			{Macro: "CM_MRA_PRIVATE_DATA", Byte: 10, Bit: 0, Width: 1776},
		},
	},
	{
		Go: "REJ", Wire: "REJ", Prefix: "CM_REJ_", AttrID: 0x0012, Size: dataSize,
		Table: "IBTA Vol 1 Table 108", Doc: "is the CM Reject message.",
		PrivateConst: "REJPrivateDataSize",
		Fields: []field{
			{Macro: "CM_REJ_LOCAL_COMM_ID", Byte: 0, Bit: 0, Width: 32},
			{Macro: "CM_REJ_REMOTE_COMM_ID", Byte: 4, Bit: 0, Width: 32},
			{Macro: "CM_REJ_MESSAGE_REJECTED", Byte: 8, Bit: 0, Width: 2, Type: "MsgResponse"},
			{Macro: "CM_REJ_REJECTED_INFO_LENGTH", Byte: 9, Bit: 0, Width: 7, Doc: "It is the number of meaningful bytes in ARI."},
			{Macro: "CM_REJ_REASON", Byte: 10, Bit: 0, Width: 16, Type: "RejectReason"},
			{Macro: "CM_REJ_ARI", Byte: 12, Bit: 0, Width: 576, Doc: "It is the Additional Rejection Information; for reason 24 it holds a ClassPortInfo."},
			{Macro: "CM_REJ_PRIVATE_DATA", Byte: 84, Bit: 0, Width: 1184},
		},
	},
	{
		Go: "REP", Wire: "REP", Prefix: "CM_REP_", AttrID: 0x0013, Size: dataSize,
		Table: "IBTA Vol 1 Table 110", Doc: "is the CM Reply to Request for Communication.",
		PrivateConst: "REPPrivateDataSize",
		Fields: []field{
			{Macro: "CM_REP_LOCAL_COMM_ID", Byte: 0, Bit: 0, Width: 32},
			{Macro: "CM_REP_REMOTE_COMM_ID", Byte: 4, Bit: 0, Width: 32},
			{Macro: "CM_REP_LOCAL_Q_KEY", Byte: 8, Bit: 0, Width: 32},
			{Macro: "CM_REP_LOCAL_QPN", Byte: 12, Bit: 0, Width: 24},
			{Macro: "CM_REP_VENDOR_ID_H", Byte: 15, Bit: 0, Width: 8, Doc: "ECE vendor ID bits 23:16."},
			{Macro: "CM_REP_LOCAL_EE_CONTEXT_NUMBER", Byte: 16, Bit: 0, Width: 24},
			{Macro: "CM_REP_VENDOR_ID_M", Byte: 19, Bit: 0, Width: 8, Doc: "ECE vendor ID bits 15:8."},
			{Macro: "CM_REP_STARTING_PSN", Byte: 20, Bit: 0, Width: 24},
			{Macro: "CM_REP_VENDOR_ID_L", Byte: 23, Bit: 0, Width: 8, Doc: "ECE vendor ID bits 7:0."},
			{Macro: "CM_REP_RESPONDER_RESOURCES", Byte: 24, Bit: 0, Width: 8},
			{Macro: "CM_REP_INITIATOR_DEPTH", Byte: 25, Bit: 0, Width: 8},
			{Macro: "CM_REP_TARGET_ACK_DELAY", Byte: 26, Bit: 0, Width: 5},
			{Macro: "CM_REP_FAILOVER_ACCEPTED", Byte: 26, Bit: 5, Width: 2},
			{Macro: "CM_REP_END_TO_END_FLOW_CONTROL", Byte: 26, Bit: 7, Width: 1},
			{Macro: "CM_REP_RNR_RETRY_COUNT", Byte: 27, Bit: 0, Width: 3},
			{Macro: "CM_REP_SRQ", Byte: 27, Bit: 3, Width: 1},
			{Macro: "CM_REP_LOCAL_CA_GUID", Byte: 28, Bit: 0, Width: 64},
			{Macro: "CM_REP_PRIVATE_DATA", Byte: 36, Bit: 0, Width: 1568},
		},
	},
	{
		Go: "RTU", Wire: "RTU", Prefix: "CM_RTU_", AttrID: 0x0014, Size: dataSize,
		Table: "IBTA Vol 1 Table 111", Doc: "is the CM Ready To Use message.",
		PrivateConst: "RTUPrivateDataSize",
		Fields: []field{
			{Macro: "CM_RTU_LOCAL_COMM_ID", Byte: 0, Bit: 0, Width: 32},
			{Macro: "CM_RTU_REMOTE_COMM_ID", Byte: 4, Bit: 0, Width: 32},
			{Macro: "CM_RTU_PRIVATE_DATA", Byte: 8, Bit: 0, Width: 1792},
		},
	},
	{
		Go: "DREQ", Wire: "DREQ", Prefix: "CM_DREQ_", AttrID: 0x0015, Size: dataSize,
		Table: "IBTA Vol 1 Table 112", Doc: "is the CM Request for Communication Release (disconnect request).",
		PrivateConst: "DREQPrivateDataSize",
		Fields: []field{
			{Macro: "CM_DREQ_LOCAL_COMM_ID", Byte: 0, Bit: 0, Width: 32},
			{Macro: "CM_DREQ_REMOTE_COMM_ID", Byte: 4, Bit: 0, Width: 32},
			{Macro: "CM_DREQ_REMOTE_QPN_EECN", Byte: 8, Bit: 0, Width: 24},
			{Macro: "CM_DREQ_PRIVATE_DATA", Byte: 12, Bit: 0, Width: 1760},
		},
	},
	{
		Go: "DREP", Wire: "DREP", Prefix: "CM_DREP_", AttrID: 0x0016, Size: dataSize,
		Table: "IBTA Vol 1 Table 113", Doc: "is the CM Reply to Request for Communication Release.",
		PrivateConst: "DREPPrivateDataSize",
		Fields: []field{
			{Macro: "CM_DREP_LOCAL_COMM_ID", Byte: 0, Bit: 0, Width: 32},
			{Macro: "CM_DREP_REMOTE_COMM_ID", Byte: 4, Bit: 0, Width: 32},
			{Macro: "CM_DREP_PRIVATE_DATA", Byte: 8, Bit: 0, Width: 1792},
		},
	},
	{
		Go: "SIDRReq", Wire: "SIDR_REQ", Prefix: "CM_SIDR_REQ_", AttrID: 0x0017, Size: dataSize,
		Table: "IBTA Vol 1 Table 119", Doc: "is the CM Service ID Resolution Request.",
		PrivateConst: "SIDRReqPrivateDataSize",
		Fields: []field{
			{Macro: "CM_SIDR_REQ_REQUESTID", Byte: 0, Bit: 0, Width: 32, Go: "RequestID"},
			{Macro: "CM_SIDR_REQ_PARTITION_KEY", Byte: 4, Bit: 0, Width: 16},
			{Macro: "CM_SIDR_REQ_SERVICEID", Byte: 8, Bit: 0, Width: 64, Go: "ServiceID"},
			{Macro: "CM_SIDR_REQ_PRIVATE_DATA", Byte: 16, Bit: 0, Width: 1728},
		},
	},
	{
		Go: "SIDRRep", Wire: "SIDR_REP", Prefix: "CM_SIDR_REP_", AttrID: 0x0018, Size: dataSize,
		Table: "IBTA Vol 1 Table 120", Doc: "is the CM Service ID Resolution Response.",
		PrivateConst: "SIDRRepPrivateDataSize",
		Fields: []field{
			{Macro: "CM_SIDR_REP_REQUESTID", Byte: 0, Bit: 0, Width: 32, Go: "RequestID"},
			{Macro: "CM_SIDR_REP_STATUS", Byte: 4, Bit: 0, Width: 8, Type: "SIDRStatus"},
			{Macro: "CM_SIDR_REP_ADDITIONAL_INFORMATION_LENGTH", Byte: 5, Bit: 0, Width: 8},
			{Macro: "CM_SIDR_REP_VENDOR_ID_H", Byte: 6, Bit: 0, Width: 16, Doc: "ECE vendor ID bits 23:8."},
			{Macro: "CM_SIDR_REP_QPN", Byte: 8, Bit: 0, Width: 24},
			{Macro: "CM_SIDR_REP_VENDOR_ID_L", Byte: 11, Bit: 0, Width: 8, Doc: "ECE vendor ID bits 7:0."},
			{Macro: "CM_SIDR_REP_SERVICEID", Byte: 12, Bit: 0, Width: 64, Go: "ServiceID"},
			{Macro: "CM_SIDR_REP_Q_KEY", Byte: 20, Bit: 0, Width: 32},
			{Macro: "CM_SIDR_REP_ADDITIONAL_INFORMATION", Byte: 24, Bit: 0, Width: 576, Doc: "For status 4 (redirect) it holds a ClassPortInfo."},
			{Macro: "CM_SIDR_REP_PRIVATE_DATA", Byte: 96, Bit: 0, Width: 1088},
		},
	},
	{
		Go: "LAP", Wire: "LAP", Prefix: "CM_LAP_", AttrID: 0x0019, Size: dataSize,
		Table: "IBTA Vol 1 Table 115", Doc: "is the CM Load Alternate Path message.",
		PrivateConst: "LAPPrivateDataSize",
		Fields: []field{
			{Macro: "CM_LAP_LOCAL_COMM_ID", Byte: 0, Bit: 0, Width: 32},
			{Macro: "CM_LAP_REMOTE_COMM_ID", Byte: 4, Bit: 0, Width: 32},
			{Macro: "CM_LAP_REMOTE_QPN_EECN", Byte: 12, Bit: 0, Width: 24},
			{Macro: "CM_LAP_REMOTE_CM_RESPONSE_TIMEOUT", Byte: 15, Bit: 0, Width: 5},
			{Macro: "CM_LAP_ALTERNATE_LOCAL_PORT_LID", Byte: 20, Bit: 0, Width: 16},
			{Macro: "CM_LAP_ALTERNATE_REMOTE_PORT_LID", Byte: 22, Bit: 0, Width: 16},
			{Macro: "CM_LAP_ALTERNATE_LOCAL_PORT_GID", Byte: 24, Bit: 0, Width: 128, Type: "GID"},
			{Macro: "CM_LAP_ALTERNATE_REMOTE_PORT_GID", Byte: 40, Bit: 0, Width: 128, Type: "GID"},
			{Macro: "CM_LAP_ALTERNATE_FLOW_LABEL", Byte: 56, Bit: 0, Width: 20},
			{Macro: "CM_LAP_ALTERNATE_TRAFFIC_CLASS", Byte: 59, Bit: 0, Width: 8},
			{Macro: "CM_LAP_ALTERNATE_HOP_LIMIT", Byte: 60, Bit: 0, Width: 8},
			{Macro: "CM_LAP_ALTERNATE_PACKET_RATE", Byte: 61, Bit: 2, Width: 6},
			{Macro: "CM_LAP_ALTERNATE_SL", Byte: 62, Bit: 0, Width: 4},
			{Macro: "CM_LAP_ALTERNATE_SUBNET_LOCAL", Byte: 62, Bit: 4, Width: 1},
			{Macro: "CM_LAP_ALTERNATE_LOCAL_ACK_TIMEOUT", Byte: 63, Bit: 0, Width: 5},
			{Macro: "CM_LAP_PRIVATE_DATA", Byte: 64, Bit: 0, Width: 1344},
		},
	},
	{
		Go: "APR", Wire: "APR", Prefix: "CM_APR_", AttrID: 0x001A, Size: dataSize,
		Table: "IBTA Vol 1 Table 116", Doc: "is the CM Alternate Path Response.",
		PrivateConst: "APRPrivateDataSize",
		Fields: []field{
			{Macro: "CM_APR_LOCAL_COMM_ID", Byte: 0, Bit: 0, Width: 32},
			{Macro: "CM_APR_REMOTE_COMM_ID", Byte: 4, Bit: 0, Width: 32},
			{Macro: "CM_APR_ADDITIONAL_INFORMATION_LENGTH", Byte: 8, Bit: 0, Width: 8},
			{Macro: "CM_APR_AR_STATUS", Byte: 9, Bit: 0, Width: 8, Type: "APRStatus"},
			{Macro: "CM_APR_ADDITIONAL_INFORMATION", Byte: 12, Bit: 0, Width: 576},
			{Macro: "CM_APR_PRIVATE_DATA", Byte: 84, Bit: 0, Width: 1184},
		},
	},
}
