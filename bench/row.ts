// One figure of the bench, as every workload reports it and the parent prints it.
export interface Row {
  readonly workload: string;
  readonly figure: string;
  readonly value: number;
  readonly unit: string;
  readonly note?: string;
}
