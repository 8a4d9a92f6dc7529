export { grant, Lane, Ticket, type LaneChange, type LaneOccupancy, type OnGrant } from './Lane.js';
export { LaneTable, type LaneStore, type Permit } from './LaneTable.js';
export { inLane, type InLaneOptions } from './inLane.js';
export { Loan, enterWithLoan } from './Loan.js';
